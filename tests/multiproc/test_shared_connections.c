/*
 * test_shared_connections.c - gangs split from a gloo gang share its
 * connections when GANG_GLOO_SHARED_CONNECTIONS=1: a process holds
 * thousands of sub-gangs on 64 descriptors, the gangs of a lineage
 * interleave over one connection per pair of processes and still get
 * exact results (their slots never meet), and a sub-gang that fails in the
 * middle of an operation closes the connections it used, which the other
 * gangs make again on their next use.
 */
#define _GNU_SOURCE
#include <dirent.h>
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
#define SUBGANGS 1500
#define SLOT_TIMED_OUT 0 /* ranks whose sub-gang operation timed out */

static int open_descriptors(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  struct dirent* e;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1; /* the directory's own */
}

/* Every rank keeps SUBGANGS sub-gangs at once, on LIMIT descriptors, and
 * runs an all-reduce on each. Colors vary, so the sub-gangs hold different
 * members: with three ranks, pairs and the whole gang. */
static int rank_thousands(gang_t* g, int rank, int size, void* arg) {
  static gang_t* subs[SUBGANGS];
  struct rlimit rl;
  int i;
  (void)arg;
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
  rl.rlim_cur = LIMIT;
  CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
  for (i = 0; i < SUBGANGS; ++i) {
    const int color = i % 4 == 0 ? 0 : (rank + i) % 2;
    int64_t x = rank + 1, y = 0, want = 0;
    int r;
    gang_status_t st = gang_split(g, color, rank, &subs[i]);
    CHECK(st == GANG_OK, "split %d of %d on %d descriptors: %s: %s", i, SUBGANGS, LIMIT,
          gang_status_name(st), gang_last_error());
    for (r = 0; r < size; ++r) {
      if ((i % 4 == 0 ? 0 : (r + i) % 2) == color) want += r + 1;
    }
    CHECK_OK(gang_all_reduce(subs[i], &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(y == want, "sub-gang %d summed %lld, not %lld", i, (long long)y, (long long)want);
  }
  CHECK(open_descriptors() < LIMIT, "%d descriptors open", open_descriptors());
  for (i = 0; i < SUBGANGS; ++i) CHECK_OK(gang_destroy(subs[i]));
  return 0;
}

static void test_thousands_of_subgangs(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_thousands, NULL, 20000, 240), 0);
}

/* A parent and two generations of sub-gangs take turns, with payloads
 * small and large (sent whole, in ring steps, and as point-to-point
 * messages of sizes that are not powers of two). */
static int rank_interleaved(gang_t* g, int rank, int size, void* arg) {
  static const size_t counts[] = {1, 9, 4097, 300001, (1u << 21) + 12345};
  gang_t* child = NULL;
  gang_t* grandchild = NULL;
  int round, k;
  (void)arg;
  CHECK_OK(gang_split(g, 0, size - rank, &child)); /* ranks reversed */
  CHECK_OK(gang_split(child, gang_rank(child) % 2, 0, &grandchild));
  for (round = 0; round < 3; ++round) {
    for (k = 0; k < (int)(sizeof counts / sizeof counts[0]); ++k) {
      gang_t* gs[3];
      int which;
      gs[0] = g;
      gs[1] = child;
      gs[2] = grandchild;
      for (which = 0; which < 3; ++which) {
        const size_t n = counts[k];
        const int me = gang_rank(gs[which]);
        const int sz = gang_size(gs[which]);
        int32_t* in = malloc(n * sizeof *in);
        int32_t* out = malloc(n * sizeof *out);
        size_t j;
        CHECK(in != NULL && out != NULL, "malloc");
        for (j = 0; j < n; ++j) in[j] = (int32_t)((me + 1) * (int32_t)(j % 1000 + which + round));
        CHECK_OK(gang_all_reduce(gs[which], in, out, n, GANG_INT32, GANG_SUM, NULL));
        for (j = 0; j < n; ++j) {
          const int32_t want = (int32_t)(sz * (sz + 1) / 2 * (int32_t)(j % 1000 + which + round));
          if (out[j] != want) {
            CHECK(0, "gang %d round %d count %zu element %zu: %d, not %d", which, round, n, j,
                  out[j], want);
          }
        }
        if (sz > 1) {
          /* A ring of point-to-point messages: to the next rank, from the
           * previous one. */
          const int next = (me + 1) % sz, prev = (me + sz - 1) % sz;
          gang_work_t* w = NULL;
          CHECK_OK(gang_group_start(gs[which]));
          CHECK_OK(gang_send(gs[which], in, n, GANG_INT32, next, k, NULL));
          CHECK_OK(gang_recv(gs[which], out, n, GANG_INT32, prev, k, NULL));
          CHECK_OK(gang_group_end(gs[which], &w));
          CHECK_OK(gang_work_wait(w, -1));
          CHECK_OK(gang_work_destroy(w));
          for (j = 0; j < n; ++j) {
            const int32_t want = (int32_t)((prev + 1) * (int32_t)(j % 1000 + which + round));
            if (out[j] != want) {
              CHECK(0, "message in gang %d count %zu element %zu: %d, not %d", which, n, j,
                    out[j], want);
            }
          }
        }
        free(in);
        free(out);
      }
    }
  }
  CHECK_OK(gang_destroy(grandchild));
  CHECK_OK(gang_destroy(child));
  return 0;
}

static void test_interleaved(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(4, "gloo", rank_interleaved, NULL, 30000, 240), 0);
}

/* Rank 2 never joins a sub-gang's all-reduce: ranks 0 and 1 time out in
 * it, after their transfers were posted, and close those connections.
 * Then every rank uses the parent and a sibling sub-gang, which make the
 * connections again, and the failed sub-gang is destroyed. */
static int rank_fail_midway(gang_t* g, int rank, int size, void* arg) {
  gang_t* child = NULL;
  gang_t* sibling = NULL;
  int64_t x = rank + 1, y = 0;
  const int64_t sum = (int64_t)size * (size + 1) / 2;
  (void)arg;
  CHECK_OK(gang_split(g, 0, rank, &child));
  CHECK_OK(gang_split(g, 0, -rank, &sibling));
  CHECK_OK(gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_all_reduce(sibling, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_set_timeout(child, 1000));
  if (rank != 2) {
    const gang_status_t st = gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    CHECK(st == GANG_ERR_TIMEOUT || st == GANG_ERR_PEER_LOST,
          "the sub-gang's all-reduce without rank 2 returned %s", gang_status_name(st));
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_TIMED_OUT], 1, __ATOMIC_SEQ_CST);
  }
  CHECK(gang_test_wait_shared(SLOT_TIMED_OUT, 2, 20000) == 0, "ranks 0 and 1 never timed out");
  y = 0;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == sum, "parent sum %lld after a sub-gang failed", (long long)y);
  y = 0;
  CHECK_OK(gang_all_reduce(sibling, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == sum, "sibling sum %lld after a sub-gang failed", (long long)y);
  CHECK_OK(gang_destroy(child));
  CHECK_OK(gang_barrier(g, NULL));
  CHECK_OK(gang_destroy(sibling));
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  return 0;
}

static void test_failure_midway(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_fail_midway, NULL, 10000, 120), 0);
}

/* Two ranks of a sub-gang disagree on a message's length: the receiver is
 * told (a mismatch, not an abort of the process), and the parent goes on. */
static int rank_length_mismatch(gang_t* g, int rank, int size, void* arg) {
  gang_t* child = NULL;
  char* buf = calloc(1u << 20, 1);
  int64_t x = 1, y = 0;
  (void)arg;
  CHECK(buf != NULL, "calloc");
  CHECK_OK(gang_split(g, rank < 2 ? 0 : 1, rank, &child));
  if (rank == 0) {
    gang_status_t st = gang_send(child, buf, (1u << 20) - 3, GANG_UINT8, 1, 7, NULL);
    CHECK(st == GANG_OK || st == GANG_ERR_PEER_LOST || st == GANG_ERR_MISMATCH ||
              st == GANG_ERR_TIMEOUT,
          "the longer send returned %s", gang_status_name(st));
  } else if (rank == 1) {
    const gang_status_t st = gang_recv(child, buf, 1000, GANG_UINT8, 0, 7, NULL);
    CHECK(st == GANG_ERR_MISMATCH, "a receive of another length returned %s: %s",
          gang_status_name(st), gang_last_error());
  }
  CHECK_OK(gang_destroy(child));
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == size, "parent sum %lld", (long long)y);
  free(buf);
  return 0;
}

static void test_length_mismatch(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_length_mismatch, NULL, 5000, 60), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_thousands_of_subgangs),
      cmocka_unit_test(test_interleaved),
      cmocka_unit_test(test_failure_midway),
      cmocka_unit_test(test_length_mismatch),
  };
  /* Set unless the caller chose (=0 shows what happens without sharing). */
  setenv("GANG_GLOO_SHARED_CONNECTIONS", "1", 0);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
