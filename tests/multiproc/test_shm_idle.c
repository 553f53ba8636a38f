/*
 * test_shm_idle.c - a rank that waits long on shm costs its host almost
 * nothing, and still learns at once what it waits in vain for. Where ranks
 * outnumber cores (a host's ranks waiting for their leader while it works
 * between hosts) every wake-up of a waiter is taken from the rank it waits
 * for: a wait of LONG_MS wakes the waiter at most WAKE_LIMIT times. Within
 * such a long wait, a peer killed with SIGKILL ends it with PEER_LOST, and
 * gang_abort from another thread with ABORTED, both within NOTICE_MS.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define WALL_S 60
#define LONG_MS 4000
/* A waiter that woke every 20 ms for the whole wait would wake 200 times
 * in it; the gang's own threads (heartbeat, watchdog) add a few dozen. */
#define WAKE_LIMIT 140
#define NOTICE_MS 1000
/* How long the wait has lasted when the peer is killed or the gang
 * aborted: past the first second, where waits wake less often. */
#define LATE_MS 2500

#define SLOT_WAITING 0
#define SLOT_EVENT_AT 1

/* ---- a quiet wait --------------------------------------------------------- */

static long voluntary_switches(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw;
}

static int rank_quiet(gang_t* g, int rank, int size, void* arg) {
  int64_t t0, elapsed;
  long before, woke;
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    gang_test_sleep_ms(LONG_MS);
    CHECK_OK(gang_barrier(g, NULL));
    return 0;
  }
  before = voluntary_switches();
  t0 = gang_test_now_ms();
  CHECK_OK(gang_barrier(g, NULL));
  elapsed = gang_test_now_ms() - t0;
  woke = voluntary_switches() - before;
  fprintf(stderr, "[rank 1] waited %lld ms, %ld voluntary context switches\n",
          (long long)elapsed, woke);
  CHECK(elapsed >= LONG_MS - 200, "the barrier returned after %lld ms, before its peer came",
        (long long)elapsed);
  CHECK(woke <= WAKE_LIMIT,
        "a wait of %lld ms switched out %ld times (at most %d): the waiter keeps waking",
        (long long)elapsed, woke, WAKE_LIMIT);
  return 0;
}

static void test_long_wait_is_quiet(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_quiet, NULL, 30000, WALL_S), 0);
}

/* ---- a long wait ended from elsewhere ------------------------------------- */

/* Milliseconds since the parent or a thread stamped SLOT_EVENT_AT. */
static int64_t since_event(void) {
  return gang_test_now_ms() -
         __atomic_load_n(&gang_test_shared_ints()[SLOT_EVENT_AT], __ATOMIC_SEQ_CST);
}

/* The wait ended with `want`, within NOTICE_MS of `event`. */
static int check_ended(gang_status_t st, int64_t noticed, gang_status_t want,
                       const char* event) {
  fprintf(stderr, "[rank 1] %s %lld ms after %s: %s\n", gang_status_name(st),
          (long long)noticed, event, gang_last_error());
  CHECK(st == want, "the wait ended with %s: %s", gang_status_name(st), gang_last_error());
  CHECK(noticed <= NOTICE_MS, "the wait ended %lld ms after %s (at most %d)",
        (long long)noticed, event, NOTICE_MS);
  return 0;
}

/* ---- a peer killed late in a long wait ------------------------------------ */

static void parent_kill_late(const pid_t* pids, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  (void)size;
  (void)arg;
  if (gang_test_wait_shared(SLOT_WAITING, 1, 20000) != 0) {
    fprintf(stderr, "parent: rank 1 never started waiting; killing rank 0 anyway\n");
  }
  gang_test_sleep_ms(LATE_MS);
  __atomic_store_n(&shared[SLOT_EVENT_AT], gang_test_now_ms(), __ATOMIC_SEQ_CST);
  gang_test_kill(pids, 0);
}

static int rank_killed_late(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  gang_status_t st;
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    gang_test_sleep_ms(60000); /* killed long before this ends */
    return 1;
  }
  __atomic_store_n(&shared[SLOT_WAITING], 1, __ATOMIC_SEQ_CST);
  st = gang_barrier(g, NULL);
  return check_ended(st, since_event(), GANG_ERR_PEER_LOST, "the kill");
}

static void test_peer_killed_late(void** s) {
  gang_test_opts_t o;
  (void)s;
  gang_test_opts_init(&o);
  o.size = 2;
  o.backend = "shm";
  o.fn = rank_killed_late;
  o.gang_timeout_ms = 30000;
  o.wall_timeout_s = WALL_S;
  o.parent_fn = parent_kill_late;
  o.killed_rank = 0;
  assert_int_equal(gang_test_run(&o), 0);
}

/* ---- gang_abort late in a long wait --------------------------------------- */

static void* abort_late(void* p) {
  gang_t* g = (gang_t*)p;
  volatile int64_t* shared = gang_test_shared_ints();
  gang_test_wait_shared(SLOT_WAITING, 1, 20000);
  gang_test_sleep_ms(LATE_MS);
  __atomic_store_n(&shared[SLOT_EVENT_AT], gang_test_now_ms(), __ATOMIC_SEQ_CST);
  gang_abort(g);
  return NULL;
}

static int rank_aborted_late(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  pthread_t th;
  gang_status_t st;
  int64_t noticed;
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    /* Never comes to the second barrier; leaves once rank 1 is done. */
    gang_test_wait_shared(SLOT_WAITING, 2, 20000);
    return 0;
  }
  CHECK(pthread_create(&th, NULL, abort_late, g) == 0, "pthread_create");
  __atomic_store_n(&shared[SLOT_WAITING], 1, __ATOMIC_SEQ_CST);
  st = gang_barrier(g, NULL);
  noticed = since_event();
  pthread_join(th, NULL);
  __atomic_store_n(&shared[SLOT_WAITING], 2, __ATOMIC_SEQ_CST);
  return check_ended(st, noticed, GANG_ERR_ABORTED, "gang_abort");
}

static void test_abort_late(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_aborted_late, NULL, 30000, WALL_S), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_wait_is_quiet),
      cmocka_unit_test(test_peer_killed_late),
      cmocka_unit_test(test_abort_late),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
