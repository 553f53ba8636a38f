/*
 * go_typemaps.i - how gang.h's arguments cross into Go (package capi).
 *
 * Catalogued, with ownership, in bindings/TYPEMAPS.md. capi is mechanical:
 * every function returns the C status as an int, and out-parameters are Go
 * pointers the C call writes through. The gang package above it locks the
 * OS thread around each call and its gang_last_error() read, converts
 * statuses to errors and keeps buffers alive across calls.
 */

%{
#include <gang/gang.h>
%}

/* cgo asks pkg-config where gang.h and libgang are: PKG_CONFIG_PATH is all
 * a build needs (an install's <prefix>/lib/pkgconfig, or this build's
 * pkgconfig-build/). */
%insert(cgo_comment_typedefs) %{
#cgo pkg-config: gang
%}

/* Enumerations are plain ints; the gang package has typed constants. */
%typemap(gotype) gang_status_t, gang_dtype_t, gang_op_t, gang_device_type_t,
                 gang_axis_t "int"

/* A C pointer argument passed as the given Go pointer type, unchanged.
 * Go memory passed this way is borrowed for the call only (cgo's rules);
 * the C side never keeps it. */
%define GANG_GO_POINTER(GOTYPE, CTYPES...)
%typemap(gotype) CTYPES GOTYPE
%typemap(imtype) CTYPES GOTYPE
%typemap(in) CTYPES %{ $1 = ($1_ltype)$input; %}
%enddef

/* Element buffers: the address of a Go slice's first element (0 for count
 * 0) as an integer, which spares every call cgo's pointer checks (about a
 * quarter of a call's overhead); the gang package keeps the slice alive
 * across the call, and Go memory does not move during a C call. */
GANG_GO_POINTER("uintptr", void*, const void*)

/* Handle out-parameters: the new handle's address, as a uintptr. Async
 * work is not exposed to Go (use goroutines): `work` is always nil. */
GANG_GO_POINTER("*uintptr", gang_t** out, gangs_t** out, gang_work_t** work)

/* Library-allocated bytes: *out is freed with gang_free once copied. */
GANG_GO_POINTER("*unsafe.Pointer", void** out)

/* Counts and lengths: size_t is uint64 on every platform Go runs gang on. */
GANG_GO_POINTER("*uint64", const size_t*, size_t*)

/* int arrays and int/double/status results. */
GANG_GO_POINTER("*int32", const int*, int*, gang_status_t*)
GANG_GO_POINTER("*float64", double*)
