/*
 * test_descriptors.c - a process that runs out of file descriptors is told
 * so. Two gloo ranks, each limited to 64 descriptors (RLIMIT_NOFILE), split
 * their gang again and again, keeping every sub-gang, until a call fails:
 * the rank that ran out gets GANG_ERR_SYSTEM saying that descriptors ran
 * out and naming its limit, not a lost peer.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define LIMIT 64
#define MAX_SPLITS 400
#define S_TOLD 0 /* ranks told that descriptors ran out */

static int run_out(gang_t* g, int rank, int size, void* arg) {
  static gang_t* subs[MAX_SPLITS];
  struct rlimit rl;
  gang_status_t st = GANG_OK;
  int n = 0;
  (void)size;
  (void)arg;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
  rl.rlim_cur = LIMIT;
  CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
  while (n < MAX_SPLITS) {
    st = gang_split(g, 0, rank, &subs[n]);
    if (st != GANG_OK) break;
    ++n;
  }
  CHECK(st != GANG_OK, "%d splits on %d descriptors and none failed", n, LIMIT);
  if (st == GANG_ERR_SYSTEM) {
    CHECK(strstr(gang_last_error(), "ran out of file descriptors") != NULL &&
              strstr(gang_last_error(), "RLIMIT_NOFILE") != NULL,
          "the message does not say what ran out: %s", gang_last_error());
    __atomic_add_fetch(&gang_test_shared_ints()[S_TOLD], 1, __ATOMIC_SEQ_CST);
  } else {
    fprintf(stderr, "rank %d: %s after %d splits: %s\n", rank, gang_status_name(st), n,
            gang_last_error());
  }
  return 0;
}

static void test_out_of_descriptors(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", run_out, NULL, 5000, 120), 0);
  assert_true(gang_test_shared_ints()[S_TOLD] >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_out_of_descriptors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
