/*
 * test_failure.c - how gangs fail: a peer killed mid-collective, gang_abort
 * from another thread, a rank that never joins. Every failure must surface
 * within the gang's timeout (plus slack), fail the gang for good (later
 * calls GANG_ERR_ABORTED at once, quoting the first error), and leave
 * gang_destroy working.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define TIMEOUT_MS 3000
#define SLACK_MS 2000
#define WALL_S 60

/* Shared slots. */
#define SLOT_READY 1    /* ranks that reached their blocking call */
#define SLOT_DONE 2     /* ranks that finished their checks */

static int is_lost_or_timeout(gang_status_t s) {
  return s == GANG_ERR_PEER_LOST || s == GANG_ERR_TIMEOUT;
}

/* After the first error: every later operation is GANG_ERR_ABORTED at once,
 * quoting the first error; the async error is the first error. */
static int check_failed_gang(gang_t* g, gang_status_t first,
                             const char* first_msg) {
  int64_t x = 1, y = 0, t0, dt;
  int32_t b = 0;
  gang_status_t async = GANG_OK;
  gang_t* sub = (gang_t*)&sub;
  gang_work_t* w = NULL;
  void* out = NULL;
  size_t out_len = 0;
  double sum = 0;
  gang_status_t s;

  CHECK_OK(gang_get_async_error(g, &async));
  CHECK(async == first, "gang_get_async_error gave %s, the first error was %s",
        gang_status_name(async), gang_status_name(first));

  t0 = gang_test_now_ms();
  CHECK_STATUS(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_ERR_ABORTED);
  dt = gang_test_now_ms() - t0;
  CHECK(dt < 500, "a call on a failed gang took %lld ms", (long long)dt);
  CHECK(strstr(gang_last_error(), first_msg) != NULL,
        "the later error \"%s\" does not quote the first \"%s\"", gang_last_error(),
        first_msg);

  CHECK_STATUS(gang_broadcast(g, &b, 1, GANG_INT32, 0, NULL), GANG_ERR_ABORTED);
  CHECK_STATUS(gang_barrier(g, NULL), GANG_ERR_ABORTED);
  CHECK_STATUS(gang_all_sum(g, 1.0, &sum), GANG_ERR_ABORTED);
  CHECK_STATUS(gang_broadcast_bytes(g, &b, sizeof b, 0, &out, &out_len), GANG_ERR_ABORTED);
  CHECK_STATUS(gang_split(g, 0, 0, &sub), GANG_ERR_ABORTED);
  CHECK(sub == NULL, "gang_split on a failed gang set *out");
  /* Asynchronously: either refused at issue or failed on wait. */
  s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w);
  if (s == GANG_OK) {
    CHECK(w != NULL, "no work");
    CHECK_STATUS(gang_work_wait(w, 1000), GANG_ERR_ABORTED);
    CHECK(strstr(gang_last_error(), first_msg) != NULL,
          "the work's error \"%s\" does not quote the first", gang_last_error());
    CHECK_OK(gang_work_destroy(w));
  } else {
    CHECK(s == GANG_ERR_ABORTED, "async issue on a failed gang gave %s",
          gang_status_name(s));
  }
  /* Errors found before issue still come first. */
  CHECK_STATUS(gang_all_reduce(g, &x, &y, 1, (gang_dtype_t)42, GANG_SUM, NULL),
               GANG_ERR_INVALID_ARGUMENT);
  /* The status stays the first error. */
  CHECK_OK(gang_get_async_error(g, &async));
  CHECK(async == first, "async error changed to %s", gang_status_name(async));
  return 0;
}

/* ---- (a) a peer killed with SIGKILL mid-collective ------------------------------- */

typedef struct kill_case {
  int victim;
  int async;
} kill_case_t;

static void parent_kill(const pid_t* pids, int size, void* arg) {
  const kill_case_t* kc = (const kill_case_t*)arg;
  if (gang_test_wait_shared(SLOT_READY, size, 20000) != 0) {
    fprintf(stderr, "parent: the ranks never got ready; killing rank %d anyway\n",
            kc->victim);
  }
  gang_test_sleep_ms(300); /* let the others block in the collective */
  gang_test_kill(pids, kc->victim);
}

static int rank_killed_peer(gang_t* g, int rank, int size, void* arg) {
  const kill_case_t* kc = (const kill_case_t*)arg;
  volatile int64_t* shared = gang_test_shared_ints();
  float* x;
  float* y;
  const size_t count = 1 << 16;
  int64_t t0, elapsed;
  gang_status_t s;
  char first[1024];
  size_t i;
  (void)size;
  CHECK_OK(gang_barrier(g, NULL)); /* everybody is connected */
  if (rank == kc->victim) {
    __atomic_add_fetch(&shared[SLOT_READY], 1, __ATOMIC_SEQ_CST);
    gang_test_sleep_ms(60000); /* killed long before this ends */
    return 1;
  }
  x = (float*)malloc(count * sizeof(float));
  y = (float*)malloc(count * sizeof(float));
  CHECK(x != NULL && y != NULL, "malloc");
  for (i = 0; i < count; ++i) x[i] = 1.0f;
  __atomic_add_fetch(&shared[SLOT_READY], 1, __ATOMIC_SEQ_CST);
  t0 = gang_test_now_ms();
  if (kc->async) {
    gang_work_t* w = NULL;
    CHECK_OK(gang_all_reduce(g, x, y, count, GANG_FLOAT32, GANG_SUM, &w));
    s = gang_work_wait(w, -1);
    elapsed = gang_test_now_ms() - t0;
    /* The work keeps its final status. */
    CHECK(gang_work_test(w) == s, "gang_work_test disagrees with gang_work_wait");
    CHECK_OK(gang_work_destroy(w));
  } else {
    s = gang_all_reduce(g, x, y, count, GANG_FLOAT32, GANG_SUM, NULL);
    elapsed = gang_test_now_ms() - t0;
  }
  gang_last_error_copy(first, sizeof first);
  fprintf(stderr, "[rank %d] killed peer: %s after %lld ms: %s\n", rank,
          gang_status_name(s), (long long)elapsed, first);
  CHECK(is_lost_or_timeout(s), "the collective returned %s, expected PEER_LOST or TIMEOUT",
        gang_status_name(s));
  CHECK(elapsed <= TIMEOUT_MS + SLACK_MS, "the failure took %lld ms (timeout %d ms)",
        (long long)elapsed, TIMEOUT_MS);
  CHECK(first[0] != '\0', "no message for the failure");
  if (check_failed_gang(g, s, first)) return 1;
  free(x);
  free(y);
  return 0;
}

static void run_kill(int size, int victim, int async) {
  kill_case_t kc;
  gang_test_opts_t o;
  kc.victim = victim;
  kc.async = async;
  gang_test_opts_init(&o);
  o.size = size;
  o.fn = rank_killed_peer;
  o.arg = &kc;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  o.parent_fn = parent_kill;
  o.killed_rank = victim;
  assert_int_equal(gang_test_run(&o), 0);
}

static void test_killed_peer_n2(void** s) { (void)s; run_kill(2, 1, 0); }
static void test_killed_peer_n3(void** s) { (void)s; run_kill(3, 2, 0); }
static void test_killed_peer_async_n4(void** s) { (void)s; run_kill(4, 1, 1); }

/* ---- (b) gang_abort from another thread ----------------------------------------------- */

typedef struct aborter {
  gang_t* g;
  int64_t at_ms;
  gang_status_t status;
} aborter_t;

static void* abort_later(void* p) {
  aborter_t* a = (aborter_t*)p;
  /* Wait until the peers are blocked too. */
  gang_test_wait_shared(SLOT_READY, gang_size(a->g), 20000);
  gang_test_sleep_ms(300);
  a->at_ms = gang_test_now_ms();
  a->status = gang_abort(a->g);
  return NULL;
}

static int rank_abort(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  int64_t x = 1, y = 0, t0, done_at, elapsed;
  gang_status_t s;
  char first[1024];
  (void)arg;
  (void)size;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    aborter_t a;
    pthread_t th;
    a.g = g;
    a.at_ms = 0;
    a.status = GANG_ERR_INTERNAL;
    CHECK(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create");
    __atomic_add_fetch(&shared[SLOT_READY], 1, __ATOMIC_SEQ_CST);
    /* Blocks: the peers are waiting in a receive, not in this all_reduce. */
    s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    done_at = gang_test_now_ms();
    gang_last_error_copy(first, sizeof first);
    pthread_join(th, NULL);
    fprintf(stderr, "[rank 0] abort: %s %lld ms after gang_abort: %s\n",
            gang_status_name(s), (long long)(done_at - a.at_ms), first);
    CHECK(a.status == GANG_OK, "gang_abort returned %s", gang_status_name(a.status));
    CHECK(s == GANG_ERR_ABORTED, "the blocked all_reduce returned %s, expected ABORTED",
          gang_status_name(s));
    CHECK(a.at_ms != 0 && done_at - a.at_ms < 2000,
          "the blocked all_reduce returned %lld ms after gang_abort",
          (long long)(done_at - a.at_ms));
    CHECK(strstr(first, "gang_abort") != NULL, "the aborted call's message \"%s\" does "
          "not say gang_abort", first);
    /* The first error is the abort itself, which later calls quote. */
    if (check_failed_gang(g, GANG_ERR_ABORTED, "gang_abort was called")) return 1;
    /* Aborting again is harmless. */
    CHECK_OK(gang_abort(g));
  } else {
    int64_t got = 0;
    __atomic_add_fetch(&shared[SLOT_READY], 1, __ATOMIC_SEQ_CST);
    t0 = gang_test_now_ms();
    s = gang_recv(g, &got, 1, GANG_INT64, 0, 77, NULL);
    elapsed = gang_test_now_ms() - t0;
    gang_last_error_copy(first, sizeof first);
    fprintf(stderr, "[rank %d] peer of the aborter: %s after %lld ms: %s\n", rank,
            gang_status_name(s), (long long)elapsed, first);
    CHECK(is_lost_or_timeout(s), "the peer's receive returned %s, expected PEER_LOST or "
          "TIMEOUT", gang_status_name(s));
    CHECK(elapsed <= TIMEOUT_MS + SLACK_MS, "the peer failed after %lld ms", (long long)elapsed);
    if (check_failed_gang(g, s, first)) return 1;
  }
  return 0;
}

static void test_abort_from_thread(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, NULL, rank_abort, NULL, TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, NULL, rank_abort, NULL, TIMEOUT_MS, WALL_S), 0);
}

/* gang_abort of an idle gang: later calls fail, destroy works. */
static int rank_abort_idle(gang_t* g, int rank, int size, void* arg) {
  int64_t x = 1, y = 0;
  (void)rank;
  (void)size;
  (void)arg;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_abort(g));
  CHECK_STATUS(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_ERR_ABORTED);
  CHECK(strstr(gang_last_error(), "abort") != NULL, "message \"%s\" does not say abort",
        gang_last_error());
  {
    gang_status_t async = GANG_OK;
    CHECK_OK(gang_get_async_error(g, &async));
    CHECK(async == GANG_ERR_ABORTED, "async error %s", gang_status_name(async));
  }
  return 0;
}

static void test_abort_idle(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, NULL, rank_abort_idle, NULL, TIMEOUT_MS, WALL_S), 0);
}

/* ---- (c) a rank that never joins ------------------------------------------------------- */

static int rank_never_joins(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  int64_t x = 1, y = 0, t0, elapsed;
  gang_status_t s;
  char first[1024];
  const int absent = size - 1;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL)); /* issue times within a few ms */
  if (rank == absent) {
    /* Stay away until the others have seen the timeout. */
    if (gang_test_wait_shared(SLOT_DONE, size - 1, TIMEOUT_MS + 20000) != 0) {
      fprintf(stderr, "[rank %d] the others never finished\n", rank);
    }
    return 0;
  }
  t0 = gang_test_now_ms();
  s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  elapsed = gang_test_now_ms() - t0;
  gang_last_error_copy(first, sizeof first);
  fprintf(stderr, "[rank %d] absent peer: %s after %lld ms: %s\n", rank,
          gang_status_name(s), (long long)elapsed, first);
  __atomic_add_fetch(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  CHECK(s == GANG_ERR_TIMEOUT, "the all_reduce returned %s, expected TIMEOUT",
        gang_status_name(s));
  CHECK(elapsed >= TIMEOUT_MS - 100 && elapsed <= TIMEOUT_MS + SLACK_MS,
        "timed out after %lld ms; the timeout is %d ms", (long long)elapsed, TIMEOUT_MS);
  if (check_failed_gang(g, s, first)) return 1;
  return 0;
}

static void test_timeout_absent_rank(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, NULL, rank_never_joins, NULL, TIMEOUT_MS, WALL_S), 0);
}

/* gang_set_timeout applies to operations issued afterwards. */
static int rank_set_timeout(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  int64_t x = 1, y = 0, t0, elapsed;
  gang_status_t s;
  (void)arg;
  CHECK(gang_get_timeout(g) == TIMEOUT_MS, "timeout %lld", (long long)gang_get_timeout(g));
  CHECK_OK(gang_set_timeout(g, 1000));
  CHECK(gang_get_timeout(g) == 1000, "timeout %lld after set", (long long)gang_get_timeout(g));
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == size - 1) {
    gang_test_wait_shared(SLOT_DONE, size - 1, 20000);
    return 0;
  }
  t0 = gang_test_now_ms();
  s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  elapsed = gang_test_now_ms() - t0;
  __atomic_add_fetch(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  CHECK(s == GANG_ERR_TIMEOUT, "returned %s", gang_status_name(s));
  CHECK(elapsed >= 900 && elapsed <= 1000 + SLACK_MS, "timed out after %lld ms with a "
        "1000 ms timeout", (long long)elapsed);
  return 0;
}

static void test_set_timeout(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, NULL, rank_set_timeout, NULL, TIMEOUT_MS, WALL_S), 0);
}

/* gang_destroy with an operation in flight is bounded by the timeout; the
 * work handle stays valid and reports a failure. */
static int rank_destroy_in_flight(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  const int all[2] = {0, 1};
  gang_t* sub = NULL;
  int64_t x = 1, y = 0, t0, elapsed;
  (void)arg;
  (void)size;
  CHECK_OK(gang_create_subgang(g, all, 2, &sub));
  CHECK(sub != NULL, "no sub-gang");
  CHECK_OK(gang_set_timeout(sub, 1000));
  if (rank == 0) {
    gang_work_t* w = NULL;
    gang_status_t s;
    CHECK_OK(gang_all_reduce(sub, &x, &y, 1, GANG_INT64, GANG_SUM, &w));
    t0 = gang_test_now_ms();
    CHECK_OK(gang_destroy(sub));
    elapsed = gang_test_now_ms() - t0;
    CHECK(elapsed <= 1000 + SLACK_MS, "gang_destroy took %lld ms with a 1000 ms timeout",
          (long long)elapsed);
    s = gang_work_wait(w, 0);
    CHECK(s == GANG_ERR_ABORTED || s == GANG_ERR_TIMEOUT || s == GANG_ERR_PEER_LOST,
          "the work of a destroyed gang reports %s", gang_status_name(s));
    CHECK_STATUS(gang_work_test(w), s);
    CHECK_OK(gang_work_destroy(w));
    __atomic_store_n(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  } else {
    CHECK(gang_test_wait_shared(SLOT_DONE, 1, 20000) == 0, "rank 0 never finished");
    CHECK_OK(gang_destroy(sub));
  }
  /* The parent gang is untouched. */
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == 2, "parent sum %lld", (long long)y);
  return 0;
}

static void test_destroy_in_flight(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, NULL, rank_destroy_in_flight, NULL, TIMEOUT_MS,
                                       WALL_S), 0);
}

/* Aborting (or failing) one gang leaves the others alone: the parent of an
 * aborted sub-gang, and a sibling, keep working on every rank. */
static int rank_abort_is_per_gang(gang_t* g, int rank, int size, void* arg) {
  const int aborter = *(const int*)arg;
  gang_t* child = NULL;
  gang_t* sibling = NULL;
  int64_t x = rank + 1, y = 0;
  const int64_t sum = (int64_t)size * (size + 1) / 2;
  CHECK_OK(gang_split(g, 0, rank, &child));
  CHECK_OK(gang_split(g, 0, -rank, &sibling));
  CHECK_OK(gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_all_reduce(sibling, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  if (rank == aborter) CHECK_OK(gang_abort(child));
  CHECK_OK(gang_barrier(g, NULL));
  /* The parent and the sibling still work everywhere. */
  y = 0;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == sum, "parent sum %lld after a child's abort", (long long)y);
  y = 0;
  CHECK_OK(gang_all_reduce(sibling, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == sum, "sibling sum %lld after a child's abort", (long long)y);
  /* The child fails everywhere, promptly. */
  {
    const int64_t t0 = gang_test_now_ms();
    const gang_status_t s = gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    const int64_t dt = gang_test_now_ms() - t0;
    if (rank == aborter) {
      CHECK(s == GANG_ERR_ABORTED, "the aborted child returned %s", gang_status_name(s));
    } else {
      CHECK(s == GANG_ERR_PEER_LOST || s == GANG_ERR_TIMEOUT || s == GANG_ERR_ABORTED,
            "the child of a peer that aborted returned %s", gang_status_name(s));
    }
    CHECK(dt <= TIMEOUT_MS + SLACK_MS, "took %lld ms", (long long)dt);
  }
  CHECK_OK(gang_destroy(child));
  CHECK_OK(gang_barrier(g, NULL));
  CHECK_OK(gang_all_reduce(sibling, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_destroy(sibling));
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  return 0;
}

static void test_abort_is_per_gang(void** s) {
  int aborter;
  (void)s;
  for (aborter = 0; aborter < 3; ++aborter) {
    assert_int_equal(gang_test_run_ranks(3, NULL, rank_abort_is_per_gang, &aborter,
                                         TIMEOUT_MS, WALL_S), 0);
  }
}

/* A peer's abort closes its connections; writing to them must fail the
 * operation, never kill this process with SIGPIPE. The ranks keep the
 * default SIGPIPE disposition, as a C program does; the race between the
 * peer's close and our write needs many rounds to show. */
static int rank_no_sigpipe(gang_t* g, int rank, int size, void* arg) {
  int it;
  (void)arg;
  for (it = 0; it < 100; ++it) {
    gang_t* child = NULL;
    int64_t x = 1, y = 0;
    gang_status_t s;
    CHECK_OK(gang_split(g, 0, rank, &child));
    CHECK_OK(gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    if (rank == it % size) CHECK_OK(gang_abort(child));
    s = gang_all_reduce(child, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    CHECK(s != GANG_OK || rank != it % size, "an aborted gang's all_reduce succeeded");
    CHECK_OK(gang_destroy(child));
    CHECK_OK(gang_barrier(g, NULL));
  }
  return 0;
}

static void test_no_sigpipe_after_peer_abort(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, NULL, rank_no_sigpipe, NULL, TIMEOUT_MS, WALL_S), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_killed_peer_n2),
      cmocka_unit_test(test_killed_peer_n3),
      cmocka_unit_test(test_killed_peer_async_n4),
      cmocka_unit_test(test_abort_from_thread),
      cmocka_unit_test(test_abort_idle),
      cmocka_unit_test(test_timeout_absent_rank),
      cmocka_unit_test(test_set_timeout),
      cmocka_unit_test(test_destroy_in_flight),
      cmocka_unit_test(test_abort_is_per_gang),
      cmocka_unit_test(test_no_sigpipe_after_peer_abort),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
