/*
 * test_fork.c - fork() never breaks the parent. A child of a process that
 * holds a gang (a DataLoader worker under Python's fork start method)
 * inherits its handles; in the child every call with one fails at once
 * with GANG_ERR_INVALID_ARGUMENT saying whose it is, gang_destroy only
 * forgets it, and the parent's gang goes on as if nothing happened: on
 * gloo and shm, with the parent's gang idle and with an operation of the
 * parent's in flight on another thread during the fork.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define TIMEOUT_MS 10000
#define FAST_MS 500
#define WALL_S 60

/* What the child does with its parent's handles; its exit status says how
 * it went (0: as promised). */
static int child_uses(gang_t* g, gang_store_t* store, gang_work_t* work) {
  int64_t x = 1, y = 0, t0 = gang_test_now_ms();
  gang_status_t s;
  s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  CHECK(s == GANG_ERR_INVALID_ARGUMENT, "all_reduce in the child: %s", gang_status_name(s));
  CHECK(strstr(gang_last_error(), "belongs to process") != NULL &&
            strstr(gang_last_error(), "gang_all_reduce") != NULL,
        "message: %s", gang_last_error());
  CHECK(gang_barrier(g, NULL) == GANG_ERR_INVALID_ARGUMENT, "barrier in the child");
  CHECK(gang_rank(g) == -1, "gang_rank in the child is %d", gang_rank(g));
  if (store != NULL) {
    int64_t v = 0;
    s = gang_store_add(store, "fork-test", 1, &v);
    CHECK(s == GANG_ERR_INVALID_ARGUMENT, "store add in the child: %s", gang_status_name(s));
    CHECK(strstr(gang_last_error(), "belongs to process") != NULL, "message: %s",
          gang_last_error());
    CHECK_OK(gang_store_destroy(store));
  }
  if (work != NULL) {
    s = gang_work_wait(work, 0);
    CHECK(s == GANG_ERR_INVALID_ARGUMENT, "work wait in the child: %s", gang_status_name(s));
    CHECK_OK(gang_work_destroy(work));
  }
  CHECK_OK(gang_destroy(g));
  CHECK(gang_destroy(g) == GANG_ERR_INVALID_ARGUMENT, "a second destroy in the child");
  CHECK(gang_test_now_ms() - t0 <= FAST_MS, "the child took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  return 0;
}

static int fork_child(gang_t* g, gang_store_t* store, gang_work_t* work, int use_exit) {
  int status = 0;
  const pid_t child = fork();
  CHECK(child >= 0, "fork failed");
  if (child == 0) {
    const int rc = child_uses(g, store, work);
    if (use_exit) exit(rc); /* atexit handlers and all */
    _exit(rc);
  }
  CHECK(waitpid(child, &status, 0) == child, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %#x)",
        status);
  return 0;
}

static int check_sum(gang_t* g, int size, const char* when) {
  int64_t x = 3, y = 0;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == 3 * size, "%s: sum %lld", when, (long long)y);
  return 0;
}

static int proc_fork(int rank, int size, const char* url, void* arg) {
  const char* backend = (const char*)arg;
  gang_options_t o;
  gang_t* g = NULL;
  gang_store_t* store = NULL;
  gang_work_t* work = NULL;
  int64_t x = 1, y = 0;
  CHECK_OK(gang_store_create(url, 0, TIMEOUT_MS, &store));
  gang_options_init(&o);
  o.backend = backend;
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = TIMEOUT_MS;
  CHECK_OK(gang_create(&o, &g));
  if (check_sum(g, size, "before the fork")) return 1;
  /* A finished work handle travels too. */
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &work));
  CHECK_OK(gang_work_wait(work, -1));
  /* Each rank forks a child in turn (the one that uses exit() runs the
   * atexit handlers as well); the others wait at the barrier. */
  if (fork_child(g, store, work, 0)) return 1;
  if (fork_child(g, store, work, 1)) return 1;
  CHECK_OK(gang_work_destroy(work));
  if (check_sum(g, size, "after the children")) return 1;
  CHECK_OK(gang_barrier(g, NULL));
  if (check_sum(g, size, "after the barrier")) return 1;
  CHECK_OK(gang_destroy(g));
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

/* A fork while another thread of the parent is inside a collective: the
 * child's handles are inert still, and the parent's collective ends
 * right. */
typedef struct busy {
  gang_t* g;
  int size;
  int rc;
} busy_t;

static void* busy_thread(void* p) {
  busy_t* b = (busy_t*)p;
  int i;
  for (i = 0; i < 200 && b->rc == 0; ++i) b->rc = check_sum(b->g, b->size, "busy thread");
  return NULL;
}

static int rank_fork_busy(gang_t* g, int rank, int size, void* arg) {
  busy_t b;
  pthread_t t;
  int i;
  (void)rank;
  (void)arg;
  b.g = g;
  b.size = size;
  b.rc = 0;
  CHECK(pthread_create(&t, NULL, busy_thread, &b) == 0, "pthread_create");
  for (i = 0; i < 5; ++i) {
    if (fork_child(g, NULL, NULL, 0)) return 1;
  }
  pthread_join(t, NULL);
  CHECK(b.rc == 0, "the parent's collectives failed");
  return check_sum(g, size, "after the busy forks");
}

static void test_fork_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(2, proc_fork, (void*)"gloo", WALL_S), 0);
}

static void test_fork_shm(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, proc_fork, (void*)"shm", WALL_S), 0);
}

static void test_fork_busy(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_fork_busy, NULL, TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_fork_busy, NULL, TIMEOUT_MS, WALL_S), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_gloo),
      cmocka_unit_test(test_fork_shm),
      cmocka_unit_test(test_fork_busy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
