/* GANG_FLIGHT_RECORDER: when a gang fails, every rank appends its recent
 * operations to <path with %r = rank>, with the failed one's status. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

/* Rank 0 aborts after a few operations; the peers fail on their next one. */
static int abort_after_work(gang_t* g, int rank, int size, void* arg) {
  (void)size;
  (void)arg;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK_OK(gang_all_reduce(g, x, x, 8, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK_OK(gang_broadcast(g, x, 8, GANG_FLOAT32, 1, NULL));
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    CHECK_OK(gang_abort(g));
  } else {
    float all[3];
    const gang_status_t s = gang_all_gather(g, x, all, 1, GANG_FLOAT32, NULL);
    CHECK(s == GANG_ERR_PEER_LOST || s == GANG_ERR_TIMEOUT, "got %s",
          gang_status_name(s));
  }
  return 0; /* the harness destroys the gang */
}

static char* slurp(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return NULL;
  static char buf[65536];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_dump_on_failure(void** state) {
  (void)state;
  char dir[] = "/tmp/gang-fr-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char pattern[128];
  snprintf(pattern, sizeof pattern, "%s/ops-%%r.txt", dir);
  setenv("GANG_FLIGHT_RECORDER", pattern, 1);
  assert_int_equal(gang_test_run_ranks(3, "gloo", abort_after_work, NULL, 10000, 60), 0);
  unsetenv("GANG_FLIGHT_RECORDER");

  for (int r = 0; r < 3; ++r) {
    char path[160];
    snprintf(path, sizeof path, "%s/ops-%d.txt", dir, r);
    const char* text = slurp(path);
    if (!text) fail_msg("rank %d wrote no %s", r, path);
    assert_non_null(strstr(text, "gang \"root\" rank"));
    assert_non_null(strstr(text, "gang_all_reduce"));
    assert_non_null(strstr(text, "gang_broadcast"));
    assert_non_null(strstr(text, "gang_barrier"));
    if (r == 0) {
      assert_non_null(strstr(text, "gang_abort was called"));
    } else {
      /* The operation that failed is listed with its status. */
      assert_non_null(strstr(text, "gang_all_gather"));
      if (!strstr(text, "PEER LOST") && !strstr(text, "TIMEOUT")) {
        fail_msg("rank %d's dump lacks the failed operation:\n%s", r, text);
      }
    }
    unlink(path);
  }
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dump_on_failure),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
