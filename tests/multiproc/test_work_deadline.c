/*
 * test_work_deadline.c - an asynchronous operation whose peer never comes
 * ends with GANG_ERR_TIMEOUT at the gang's timeout even when the caller only
 * polls it (gang_work_test, or gang_work_wait with a short bound), never
 * waiting with -1.
 *
 * Two ranks; the operations run with a 1000 ms gang timeout. Rank 0 issues
 * an operation rank 1 never joins (rank 1 sleeps, then destroys its gang)
 * and polls its work until it ends.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

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

/* The operations' timeout. Gang creation gets longer (CREATE_TIMEOUT_MS) so
 * that a loaded machine cannot fail the rendezvous itself. */
#define OP_TIMEOUT_MS 1000
#define CREATE_TIMEOUT_MS 10000
/* The operation must end within its timeout plus this. */
#define SLACK_MS 3000
/* Rank 1 stays away this long, then destroys its gang. */
#define ABSENT_MS 4000
/* Polling gives up here, so that a case always reaches a verdict. */
#define GIVE_UP_MS (OP_TIMEOUT_MS + SLACK_MS + 4000)
#define WALL_S 60

enum { OP_RECV, OP_ALL_REDUCE };
enum { POLL_TEST, POLL_WAIT_10 };

typedef struct deadline_case {
  int op;
  int poll;
} deadline_case_t;

static const char* op_name(int op) { return op == OP_RECV ? "gang_recv" : "gang_all_reduce"; }

static const char* poll_name(int poll) {
  return poll == POLL_TEST ? "gang_work_test" : "gang_work_wait(w, 10)";
}

static int rank_deadline(gang_t* g, int rank, int size, void* arg) {
  const deadline_case_t* c = (const deadline_case_t*)arg;
  float buf[16];
  float x[16];
  gang_work_t* w = NULL;
  gang_status_t s = GANG_IN_PROGRESS, async = GANG_OK;
  int64_t t0, elapsed, polls = 0;
  char err[512];
  int j;
  (void)size;
  CHECK_OK(gang_set_timeout(g, OP_TIMEOUT_MS));
  CHECK(gang_get_timeout(g) == OP_TIMEOUT_MS, "gang_get_timeout is %lld",
        (long long)gang_get_timeout(g));
  if (rank == 1) {
    /* Never joins: stays away, then leaves (the harness destroys the gang). */
    gang_test_sleep_ms(ABSENT_MS);
    return 0;
  }

  for (j = 0; j < 16; ++j) {
    x[j] = (float)j;
    buf[j] = -1.0f;
  }
  t0 = gang_test_now_ms();
  if (c->op == OP_RECV) {
    CHECK_OK(gang_recv(g, buf, 16, GANG_FLOAT32, 1, 4, &w));
  } else {
    CHECK_OK(gang_all_reduce(g, x, buf, 16, GANG_FLOAT32, GANG_SUM, &w));
  }
  CHECK(w != NULL, "%s gave no work", op_name(c->op));
  for (;;) {
    s = c->poll == POLL_TEST ? gang_work_test(w) : gang_work_wait(w, 10);
    ++polls;
    if (s != GANG_IN_PROGRESS) break;
    if (gang_test_now_ms() - t0 > GIVE_UP_MS) break;
    if (c->poll == POLL_TEST) gang_test_sleep_ms(10);
  }
  elapsed = gang_test_now_ms() - t0;
  gang_last_error_copy(err, sizeof err);
  CHECK(s == GANG_ERR_TIMEOUT,
        "polling an async %s that rank 1 never joins with %s: %s after %lld ms and %lld "
        "polls, expected GANG_ERR_TIMEOUT within %d ms",
        op_name(c->op), poll_name(c->poll), gang_status_name(s), (long long)elapsed,
        (long long)polls, OP_TIMEOUT_MS + SLACK_MS);
  CHECK(elapsed >= OP_TIMEOUT_MS - 100, "%s timed out after %lld ms, before its %d ms timeout",
        op_name(c->op), (long long)elapsed, OP_TIMEOUT_MS);
  CHECK(elapsed <= OP_TIMEOUT_MS + SLACK_MS, "%s timed out only after %lld ms (timeout %d ms)",
        op_name(c->op), (long long)elapsed, OP_TIMEOUT_MS);
  CHECK(err[0] != '\0', "no last error after %s returned GANG_ERR_TIMEOUT", poll_name(c->poll));

  /* The failure is the gang's now. */
  CHECK_OK(gang_get_async_error(g, &async));
  CHECK(async == GANG_ERR_TIMEOUT, "gang_get_async_error reports %s after the timeout",
        gang_status_name(async));
  /* The work keeps its status. */
  CHECK_STATUS(gang_work_test(w), GANG_ERR_TIMEOUT);
  CHECK_STATUS(gang_work_wait(w, 0), GANG_ERR_TIMEOUT);
  CHECK_STATUS(gang_work_wait(w, -1), GANG_ERR_TIMEOUT);
  CHECK_OK(gang_work_destroy(w));
  /* Later operations fail at once. */
  {
    int64_t a = 1, b = 0, t1 = gang_test_now_ms(), took;
    CHECK_STATUS(gang_all_reduce(g, &a, &b, 1, GANG_INT64, GANG_SUM, NULL), GANG_ERR_ABORTED);
    took = gang_test_now_ms() - t1;
    CHECK(took < 500, "an operation on the failed gang took %lld ms to fail", (long long)took);
  }
  return 0;
}

static void run_case(int op, int poll) {
  deadline_case_t c;
  gang_test_opts_t o;
  c.op = op;
  c.poll = poll;
  gang_test_opts_init(&o);
  o.size = 2;
  o.backend = "gloo";
  o.fn = rank_deadline;
  o.arg = &c;
  o.gang_timeout_ms = CREATE_TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
}

static void test_recv_polled_with_test(void** s) { (void)s; run_case(OP_RECV, POLL_TEST); }
static void test_recv_polled_with_wait(void** s) { (void)s; run_case(OP_RECV, POLL_WAIT_10); }
static void test_all_reduce_polled_with_test(void** s) {
  (void)s;
  run_case(OP_ALL_REDUCE, POLL_TEST);
}
static void test_all_reduce_polled_with_wait(void** s) {
  (void)s;
  run_case(OP_ALL_REDUCE, POLL_WAIT_10);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recv_polled_with_test),
      cmocka_unit_test(test_recv_polled_with_wait),
      cmocka_unit_test(test_all_reduce_polled_with_test),
      cmocka_unit_test(test_all_reduce_polled_with_wait),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
