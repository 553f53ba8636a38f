/*
 * test_two_level_pipeline.c - large all-reduces on two levels (shm within a
 * host, gloo between the hosts' leaders) run in chunks, the leaders'
 * exchange of one chunk beside the host's steps on the others (from 32 MiB,
 * backends/two_level/two_level.cc). The ranks play two hosts (GANG_TEST_HOSTS=2).
 *
 *   - 40 MiB of float32 (SUM, AVG) and of int64 (MAX), out of place and in
 *     place, on 3 and 4 ranks: every element right on every rank (a count
 *     that is no multiple of the chunks, so the last chunk is longer);
 *   - a leader SIGKILLed while the others are inside a pipelined
 *     all-reduce: every survivor fails within seconds, naming the lost
 *     rank, never waiting for the gang's timeout.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

/* 40 MiB of 4-byte elements, plus a few: ten chunks' worth, cut into 8. */
#define COUNT ((size_t)10 * 1024 * 1024 + 3)
#define TIMEOUT_MS 60000
#define LOST_LIMIT_MS 10000

static float f_input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 7)); }

static int check_float(gang_t* g, int rank, int size, gang_op_t op, int in_place) {
  float* send = (float*)malloc(COUNT * sizeof(float));
  float* recv = in_place ? send : (float*)malloc(COUNT * sizeof(float));
  size_t i;
  int bad = 0;
  /* Sum over ranks of (r + 1) * (i % 7): size (size + 1) / 2 * (i % 7). */
  const float ranks_sum = (float)(size * (size + 1) / 2);
  CHECK(send != NULL && recv != NULL, "out of memory");
  for (i = 0; i < COUNT; ++i) send[i] = f_input(rank, i);
  CHECK_OK(gang_all_reduce(g, send, recv, COUNT, GANG_FLOAT32, op, NULL));
  CHECK(strcmp(gang_backend_name(g), "shm+gloo") == 0, "backend is %s, not shm+gloo",
        gang_backend_name(g));
  for (i = 0; i < COUNT && !bad; ++i) {
    float want = ranks_sum * (float)(i % 7);
    if (op == GANG_AVG) want /= (float)size;
    if (recv[i] != want) {
      gang_test_report(__FILE__, __LINE__, "recv[i] == want",
                       "%s %s: element %zu is %g, expected %g",
                       op == GANG_AVG ? "avg" : "sum", in_place ? "in place" : "out of place",
                       i, (double)recv[i], (double)want);
      bad = 1;
    }
  }
  if (!in_place) {
    for (i = 0; i < COUNT && !bad; ++i) {
      if (send[i] != f_input(rank, i)) {
        gang_test_report(__FILE__, __LINE__, "send unchanged", "element %zu changed", i);
        bad = 1;
      }
    }
    free(recv);
  }
  free(send);
  return bad;
}

static int check_max(gang_t* g, int rank, int size) {
  const size_t n = COUNT / 2; /* 40 MiB of int64 */
  int64_t* x = (int64_t*)malloc(n * sizeof(int64_t));
  size_t i;
  CHECK(x != NULL, "out of memory");
  /* Rank (i % size) holds the largest value at i. */
  for (i = 0; i < n; ++i) {
    x[i] = (int64_t)(i % (size_t)size) == rank ? (int64_t)i * 3 : -(int64_t)rank;
  }
  CHECK_OK(gang_all_reduce(g, x, x, n, GANG_INT64, GANG_MAX, NULL));
  for (i = 0; i < n; ++i) {
    if (x[i] != (int64_t)i * 3) {
      gang_test_report(__FILE__, __LINE__, "x[i] == 3 i", "element %zu is %lld", i,
                       (long long)x[i]);
      free(x);
      return 1;
    }
  }
  free(x);
  return 0;
}

static int run_right(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  if (check_float(g, rank, size, GANG_SUM, 0)) return 1;
  if (check_float(g, rank, size, GANG_AVG, 1)) return 1;
  return check_max(g, rank, size);
}

static void run(int size, gang_test_fn fn, int killed, void (*parent_fn)(const pid_t*, int, void*)) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = size;
  o.backend = "auto";
  o.fn = fn;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = 120;
  o.killed_rank = killed;
  o.parent_fn = parent_fn;
  setenv("GANG_TEST_HOSTS", "2", 1);
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_TEST_HOSTS");
}

static void test_right_n3(void** state) {
  (void)state;
  run(3, run_right, -1, NULL);
}

static void test_right_n4(void** state) {
  (void)state;
  run(4, run_right, -1, NULL);
}

/* Rank 1 leads host 1 (ranks 1 and 3). The others start a pipelined
 * all-reduce; rank 1 says it is ready and waits, and the parent kills it
 * once the others have had time to get inside. */
#define READY_SLOT 0
static int run_lost(gang_t* g, int rank, int size, void* arg) {
  float* x;
  int64_t t0, ms;
  gang_status_t s;
  char text[512];
  (void)arg;
  (void)size;
  if (rank == 1) {
    gang_test_shared_ints()[READY_SLOT] = 1;
    for (;;) pause(); /* killed here */
  }
  x = (float*)calloc(COUNT, sizeof(float));
  CHECK(x != NULL, "out of memory");
  t0 = gang_test_now_ms();
  s = gang_all_reduce(g, x, x, COUNT, GANG_FLOAT32, GANG_SUM, NULL);
  ms = gang_test_now_ms() - t0;
  snprintf(text, sizeof text, "%s", gang_last_error());
  free(x);
  CHECK(s == GANG_ERR_PEER_LOST || s == GANG_ERR_ABORTED,
        "the all-reduce returned %s", gang_status_name(s));
  CHECK(ms < LOST_LIMIT_MS, "it took %lld ms to fail", (long long)ms);
  CHECK(strstr(text, "rank 1") != NULL, "the error does not name rank 1: %s", text);
  printf("pipeline | rank %d | %s after %lld ms: %s\n", rank, gang_status_name(s),
         (long long)ms, text);
  return 0;
}

static void kill_leader(const pid_t* pids, int size, void* arg) {
  (void)size;
  (void)arg;
  if (gang_test_wait_shared(READY_SLOT, 1, 30000) != 0) return;
  gang_test_sleep_ms(300);
  gang_test_kill(pids, 1);
}

static void test_leader_lost_n4(void** state) {
  (void)state;
  run(4, run_lost, 1, kill_leader);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_right_n3),
      cmocka_unit_test(test_right_n4),
      cmocka_unit_test(test_leader_lost_n4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
