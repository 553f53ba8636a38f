/*
 * gang.i - the language-neutral SWIG description of gang's C API.
 *
 * Each language's module (python/gang_python.i, go/gang_go.i) defines its
 * typemaps first and then includes this file, so everything here holds for
 * every target language:
 *
 *  - gang.h is wrapped as it is, one wrapper per C function, except what a
 *    binding cannot use (static inline initialisers, the stores, the
 *    size-versioned *_init_v functions, the *_FORCE_32BIT enum members).
 *  - The handles gang_t, gangs_t and gang_work_t are classes (GangHandle,
 *    GangsHandle, WorkHandle) without constructors; their destructors call
 *    the matching *_destroy, so a handle the target language owns is freed
 *    once, by whoever drops the last reference. Handles come back through
 *    the `out` / `work` out-parameters, whose typemaps mark them owned: the
 *    out-parameter form of %newobject. gangs_get returns a borrowed handle.
 *  - The option structs are reached through the flat helpers below
 *    (gang_bind_*), which fill them with the header's own initialisers: a
 *    binding can neither call a static inline function nor keep C strings
 *    alive inside a struct it does not own.
 *  - gang_status_t is how errors travel: each language maps a negative
 *    status to its own error (an exception in Python, an error value in Go)
 *    and reads gang_last_error() on the thread that made the call.
 *
 * The C API itself is documented in include/gang/gang.h; the typemaps and
 * the ownership of every buffer are listed in bindings/TYPEMAPS.md.
 */

%{
#include <stdlib.h>
#include <string.h>
#include <gang/gang.h>
%}

/* gang_export.h's macros, as SWIG must see them. */
#define GANG_API
#define GANG_BEGIN_DECLS
#define GANG_END_DECLS

%include <stdint.i>

/* ---- handles as classes ------------------------------------------------ */

%rename(GangHandle) gang_s;
%rename(GangsHandle) gangs_s;
%rename(WorkHandle) gang_work_s;

%nodefaultctor gang_s;
%nodefaultctor gangs_s;
%nodefaultctor gang_work_s;

/* Incomplete in C; SWIG only needs to know they are classes. */
struct gang_s {};
struct gangs_s {};
struct gang_work_s {};

%extend gang_s {
  ~gang_s() { gang_destroy($self); }
}
%extend gangs_s {
  ~gangs_s() { gangs_destroy($self); }
}
%extend gang_work_s {
  ~gang_work_s() { gang_work_destroy($self); }
}

/* ---- what the bindings leave out ---------------------------------------- */

/* Stores: bindings rendezvous through init_method URLs. */
%rename("$ignore", regextarget=1) "^gang_store_";
/* Struct initialisers: the helpers below call them. */
%ignore gang_options_init;
%ignore gang_options_init_v;
%ignore gang_parallel_config_init;
%ignore gang_parallel_config_init_v;
%ignore gang_env_init;
%ignore gang_env_init_v;
%ignore gang_options;
%ignore gang_parallel_config;
/* Redundant with gang_last_error, which every language copies at once. */
%ignore gang_last_error_copy;
%ignore GANG_STATUS_FORCE_32BIT;
%ignore GANG_DTYPE_FORCE_32BIT;
%ignore GANG_OP_FORCE_32BIT;
%ignore GANG_DEVICE_TYPE_FORCE_32BIT;
%ignore GANG_AXIS_FORCE_32BIT;

/* gang_env_t is plain data: read-only fields and a constructor that runs
 * gang_env_init, so gang_env_detect can be handed a fresh one. */
%immutable gang_env::struct_size;
%immutable gang_env::rank;
%immutable gang_env::size;
%immutable gang_env::local_rank;
%immutable gang_env::local_size;
%immutable gang_env::node_rank;
%immutable gang_env::num_nodes;
%immutable gang_env::master_port;
%immutable gang_env::master_addr;
%immutable gang_env::source;
%ignore gang_env::reserved0;
%extend gang_env {
  gang_env() {
    gang_env_t* env = (gang_env_t*)calloc(1, sizeof *env);
    if (env) gang_env_init(env);
    return env;
  }
  ~gang_env() { free($self); }
}

/* gang.h builds gang_status_t from the list in gang_status.h, which SWIG
 * does not follow on its own. */
%include "gang/gang_status.h"
%include "gang/gang.h"

/* ---- flat helpers ------------------------------------------------------- */

%ignore gang_bind_config_;
%ignore gang_bind_str_;

%inline %{
/* Empty strings mean "not given" (Go has no NULL string). */
static const char* gang_bind_str_(const char* s) {
  return s != NULL && s[0] != '\0' ? s : NULL;
}

/* gang_create with each option as an argument. NULL or empty strings and
 * -1 keep the defaults; see gang_options_t. */
static gang_status_t gang_bind_create(const char* backend, int device_type,
                                      int device_index, int rank, int size,
                                      const char* init_method,
                                      int64_t timeout_ms, const char* name,
                                      int debug, gang_t** out) {
  gang_options_t options;
  gang_options_init(&options);
  options.backend = gang_bind_str_(backend);
  options.device_type = device_type;
  options.device_index = device_index;
  options.rank = rank;
  options.size = size;
  options.init_method = gang_bind_str_(init_method);
  options.timeout_ms = timeout_ms;
  options.name = gang_bind_str_(name);
  options.debug = debug;
  return gang_create(&options, out);
}

/* gang_join with the options as arguments, as gang_bind_create. */
static gang_status_t gang_bind_join(const char* backend, int device_type,
                                    int device_index, const char* init_method,
                                    int64_t timeout_ms, const char* name,
                                    gang_t** out) {
  gang_options_t options;
  gang_options_init(&options);
  options.backend = gang_bind_str_(backend);
  options.device_type = device_type;
  options.device_index = device_index;
  options.init_method = gang_bind_str_(init_method);
  options.timeout_ms = timeout_ms;
  options.name = gang_bind_str_(name);
  return gang_join(&options, out);
}

/* Fills a gang_parallel_config_t; degrees <= 0 and an empty order keep
 * the defaults. */
static void gang_bind_config_(gang_parallel_config_t* config, int tp, int cp,
                              int pp, int dp, int ep, int sdp,
                              const char* order) {
  gang_parallel_config_init(config);
  if (tp > 0) config->tp = tp;
  if (cp > 0) config->cp = cp;
  if (pp > 0) config->pp = pp;
  if (dp > 0) config->dp = dp;
  if (ep > 0) config->ep = ep;
  if (sdp > 0) config->sdp = sdp;
  config->order = gang_bind_str_(order);
}

/* gangs_split_parallel with the degrees as arguments (<= 0: default). */
static gang_status_t gang_bind_split_parallel(gang_t* gang, int tp, int cp,
                                              int pp, int dp, int ep, int sdp,
                                              const char* order,
                                              gangs_t** out) {
  gang_parallel_config_t config;
  gang_bind_config_(&config, tp, cp, pp, dp, ep, sdp, order);
  return gangs_split_parallel(gang, &config, out);
}

/* gang_layout_ranks with the degrees as arguments (<= 0: default). */
static gang_status_t gang_bind_layout_ranks(int size, int tp, int cp, int pp,
                                            int dp, int ep, int sdp,
                                            const char* order,
                                            gang_axis_t axis, int rank,
                                            int* ranks, size_t capacity,
                                            size_t* n) {
  gang_parallel_config_t config;
  gang_bind_config_(&config, tp, cp, pp, dp, ep, sdp, order);
  return gang_layout_ranks(size, &config, axis, rank, ranks, capacity, n);
}

/* gangs_split_after_loss with the degrees as arguments (<= 0: default). */
static gang_status_t gang_bind_split_after_loss(gang_t* old_gang,
                                                gang_t* shrunk, int tp, int cp,
                                                int pp, int dp, int ep,
                                                int sdp, const char* order,
                                                gangs_t** out) {
  gang_parallel_config_t config;
  gang_bind_config_(&config, tp, cp, pp, dp, ep, sdp, order);
  return gangs_split_after_loss(old_gang, shrunk, &config, out);
}

/* gang_layout_after_loss with the degrees as arguments (<= 0: default).
 * Only dp changes, so only the active ranks come back: the new dp is
 * *n_active / (tp*cp*pp). */
static gang_status_t gang_bind_layout_after_loss(
    int size, int tp, int cp, int pp, int dp, int ep, int sdp,
    const char* order, const int* survivors, int n_survivors, int* active,
    size_t capacity, size_t* n_active) {
  gang_parallel_config_t config, now;
  gang_bind_config_(&config, tp, cp, pp, dp, ep, sdp, order);
  gang_parallel_config_init(&now);
  return gang_layout_after_loss(
      size, &config, survivors, n_survivors > 0 ? (size_t)n_survivors : 0,
      &now, active, capacity, n_active);
}
%}
