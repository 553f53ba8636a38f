/* test_dlopen.c - gang as a runtime that loads it by hand meets it: the
 * program is not linked with libgang. It loads libgang.so.0 with dlopen (by
 * SONAME, found through LD_LIBRARY_PATH), resolves every function it calls
 * by name and version node (dlvsym, GANG_0.1), checks the version number
 * against the header it was built with, fills gang_options_t through
 * gang_options_init_v with its own sizeof, and runs a 2-rank all-reduce in
 * two forked processes that meet through a file store.
 *
 * Exit 0: pass, 1: fail. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gang/gang.h> /* types and constants only: nothing here is linked */

#define NODE "GANG_0.1"

static struct {
  unsigned (*version_number)(void);
  const char* (*last_error)(void);
  const char* (*status_name)(gang_status_t);
  void (*options_init_v)(gang_options_t*, size_t);
  gang_status_t (*create)(const gang_options_t*, gang_t**);
  gang_status_t (*all_reduce)(gang_t*, const void*, void*, size_t, gang_dtype_t, gang_op_t,
                              gang_work_t**);
  int (*rank)(const gang_t*);
  gang_status_t (*destroy)(gang_t*);
} api;

static int resolve(void* lib, const char* name, void* slot) {
  void* f = dlvsym(lib, name, NODE);
  if (f == NULL) {
    fprintf(stderr, "FAIL: %s@%s: %s\n", name, NODE, dlerror());
    return 0;
  }
  memcpy(slot, &f, sizeof f);
  return 1;
}

static void* lib_handle;

static int rank_main(int rank, const char* url) {
  gang_options_t o;
  gang_t* g = NULL;
  double x[4] = {1, 2, 3, 4};
  int i;
  memset(&o, 0xff, sizeof o); /* init must set every field */
  api.options_init_v(&o, sizeof o);
  if (o.struct_size != sizeof o || o.backend != NULL || o.rank != -1) {
    fprintf(stderr, "FAIL: gang_options_init_v left struct_size %zu rank %d\n", o.struct_size,
            (int)o.rank);
    return 1;
  }
  o.rank = rank;
  o.size = 2;
  o.init_method = url;
  o.timeout_ms = 30000;
  if (api.create(&o, &g) != GANG_OK) {
    fprintf(stderr, "FAIL: rank %d: gang_create: %s\n", rank, api.last_error());
    return 1;
  }
  for (i = 0; i < 4; ++i) x[i] *= rank + 1;
  if (api.all_reduce(g, x, x, 4, GANG_FLOAT64, GANG_SUM, NULL) != GANG_OK) {
    fprintf(stderr, "FAIL: rank %d: gang_all_reduce: %s\n", rank, api.last_error());
    return 1;
  }
  for (i = 0; i < 4; ++i) {
    if (x[i] != 3.0 * (i + 1)) {
      fprintf(stderr, "FAIL: rank %d: x[%d] = %g, expected %g\n", rank, i, x[i], 3.0 * (i + 1));
      return 1;
    }
  }
  if (api.rank(g) != rank || api.destroy(g) != GANG_OK) {
    fprintf(stderr, "FAIL: rank %d: gang_rank or gang_destroy\n", rank);
    return 1;
  }
  /* A runtime that unloads what it loaded (LuaJIT does, at the latest at
   * exit): gang's threads outlive the gang, so the library stays mapped
   * (-z nodelete), and this rank lives on without a crash. */
  dlclose(lib_handle);
  usleep(300 * 1000);
  if (dlopen("libgang.so.0", RTLD_NOW | RTLD_NOLOAD) == NULL) {
    fprintf(stderr, "FAIL: rank %d: dlclose unmapped libgang under its threads\n", rank);
    return 1;
  }
  return 0;
}

int main(void) {
  char dir[] = "/tmp/gang-dlopen.XXXXXX";
  char url[64];
  pid_t pids[2];
  int r, failed = 0;
  void* lib = dlopen("libgang.so.0", RTLD_NOW | RTLD_LOCAL);
  lib_handle = lib;
  if (lib == NULL) {
    fprintf(stderr, "FAIL: dlopen(libgang.so.0): %s\n", dlerror());
    return 1;
  }
  if (!(resolve(lib, "gang_version_number", &api.version_number) &&
        resolve(lib, "gang_last_error", &api.last_error) &&
        resolve(lib, "gang_status_name", &api.status_name) &&
        resolve(lib, "gang_options_init_v", &api.options_init_v) &&
        resolve(lib, "gang_create", &api.create) &&
        resolve(lib, "gang_all_reduce", &api.all_reduce) &&
        resolve(lib, "gang_rank", &api.rank) && resolve(lib, "gang_destroy", &api.destroy))) {
    return 1;
  }
  /* A name the library does not have stays unresolved, not a crash. */
  if (dlsym(lib, "gang_no_such_function") != NULL) {
    fprintf(stderr, "FAIL: dlsym found gang_no_such_function\n");
    return 1;
  }
  if (api.version_number() != GANG_VERSION_NUMBER) {
    fprintf(stderr, "FAIL: gang_version_number() %u, the header says %u\n",
            api.version_number(), (unsigned)GANG_VERSION_NUMBER);
    return 1;
  }
  if (strcmp(api.status_name(GANG_ERR_TIMEOUT), "GANG_ERR_TIMEOUT") != 0) {
    fprintf(stderr, "FAIL: gang_status_name(GANG_ERR_TIMEOUT) = %s\n",
            api.status_name(GANG_ERR_TIMEOUT));
    return 1;
  }
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(url, sizeof url, "file://%s", dir);
  fflush(NULL);
  for (r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(rank_main(r, url));
  }
  for (r = 0; r < 2; ++r) {
    int st = 0;
    if (waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  if (!failed) printf("ok: libgang %u loaded with dlopen; a 2-rank all-reduce ran\n",
                      api.version_number());
  dlclose(lib);
  return failed;
}
