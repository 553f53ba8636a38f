/*
 * gang_export.h - symbol visibility and C linkage helpers.
 *
 * The library is built with hidden visibility; only declarations marked
 * GANG_API are exported, and the linker version script (src/gang.map) admits
 * only gang_* and gangs_* names.
 */
#ifndef GANG_EXPORT_H
#define GANG_EXPORT_H

#if defined(_WIN32)
#  if defined(GANG_BUILDING_LIBRARY)
#    define GANG_API __declspec(dllexport)
#  else
#    define GANG_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define GANG_API __attribute__((visibility("default")))
#else
#  define GANG_API
#endif

#ifdef __cplusplus
#  define GANG_BEGIN_DECLS extern "C" {
#  define GANG_END_DECLS }
#else
#  define GANG_BEGIN_DECLS
#  define GANG_END_DECLS
#endif

#endif /* GANG_EXPORT_H */
