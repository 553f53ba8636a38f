#define _POSIX_C_SOURCE 200809L
/* Debug checks: with options.debug = 1 or GANG_DEBUG=detail, ranks that call
 * different operations fail with GANG_ERR_MISMATCH naming both calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static gang_t* create_debug(const char* url, int rank, int size, int debug) {
  gang_store_t* st = NULL;
  gang_t* g = NULL;
  if (gang_store_create(url, 0, 10000, &st) != GANG_OK) return NULL;
  gang_options_t o;
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.store = st;
  o.timeout_ms = 10000;
  o.debug = debug;
  if (gang_create(&o, &g) != GANG_OK) g = NULL;
  /* The gang keeps the store alive; the handle can go. */
  gang_store_destroy(st);
  return g;
}

/* Matching calls pass the check; a mismatch fails every rank, names both
 * calls, and fails the gang. */
static int mismatch(int rank, int size, const char* url, void* arg) {
  const int debug = arg ? 0 : 1; /* arg set: the environment decides */
  gang_t* g = create_debug(url, rank, size, debug);
  CHECK(g != NULL, "gang_create failed");
  float x[3] = {1, 2, 3}, y[9];
  CHECK_OK(gang_all_reduce(g, x, x, 3, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK_OK(gang_all_gather(g, x, y, 3, GANG_FLOAT32, NULL));
  CHECK_OK(gang_barrier(g, NULL));
  size_t counts[3] = {1, 2, 3};
  float v[6];
  CHECK_OK(gang_all_gatherv(g, x, counts[rank], v, counts, (size_t)size,
                            GANG_FLOAT32, NULL));
  gang_status_t s;
  if (rank == 1) {
    s = gang_broadcast(g, x, 3, GANG_FLOAT32, 0, NULL);
  } else {
    s = gang_all_reduce(g, x, x, 3, GANG_FLOAT32, GANG_MAX, NULL);
  }
  CHECK(s == GANG_ERR_MISMATCH, "mismatch gave %s", gang_status_name(s));
  CHECK(strstr(gang_last_error(), "gang_broadcast(float32, count 3, root 0)") &&
            strstr(gang_last_error(), "gang_all_reduce(float32, count 3, max)"),
        "message: %s", gang_last_error());
  CHECK_STATUS(gang_barrier(g, NULL), GANG_ERR_ABORTED);
  CHECK(strstr(gang_last_error(), "ranks called different operations"),
        "later message: %s", gang_last_error());
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_mismatch_with_options(void** state) {
  (void)state;
  assert_int_equal(gang_test_run_procs(3, mismatch, NULL, 60), 0);
}

static void test_mismatch_with_environment(void** state) {
  (void)state;
  setenv("GANG_DEBUG", "detail", 1);
  assert_int_equal(gang_test_run_procs(3, mismatch, (void*)1, 60), 0);
  unsetenv("GANG_DEBUG");
}

/* Without checks a different count would not be noticed; with them a count
 * that differs is a mismatch too. */
static int count_mismatch(int rank, int size, const char* url, void* arg) {
  (void)arg;
  gang_t* g = create_debug(url, rank, size, 1);
  CHECK(g != NULL, "gang_create failed");
  int32_t x[4] = {0};
  CHECK_STATUS(gang_all_reduce(g, x, x, rank == 0 ? 4 : 3, GANG_INT32, GANG_SUM, NULL),
               GANG_ERR_MISMATCH);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_count_mismatch(void** state) {
  (void)state;
  assert_int_equal(gang_test_run_procs(2, count_mismatch, NULL, 60), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mismatch_with_options),
      cmocka_unit_test(test_mismatch_with_environment),
      cmocka_unit_test(test_count_mismatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
