/*
 * test_grow.c - gang_join and gang_grow: a new process asks to join a
 * running 3-rank gang and the members admit it at a step boundary (the
 * grown gang has the members first, then the joiner, and all-reduces
 * right); a joiner nobody admits times out cleanly and is not counted by a
 * later gang_grow; gang_grow with no joiner returns NULL at once. A joiner
 * that dies after taking its ticket (before or after saying what it asks
 * for), or after it was admitted, is skipped within the detection interval
 * and the others come in;
 * the grown gang keeps the members' backend (gloo stays gloo for a joiner
 * that asked for "auto"); a joiner asking for another backend, or a fake
 * one, is refused at once, naming both; so is a gang_create whose ranks
 * ask for different backends.
 */
#define _GNU_SOURCE
#include <setjmp.h>
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

#define MEMBERS 3
#define WALL_S 90
#define SLOT_GAVE_UP 1  /* the joiner that timed out has returned */
#define SLOT_LOOKED 2   /* members whose first gang_grow returned */

static const char* g_member_backend = NULL; /* NULL: auto */

static gang_status_t member_gang(int rank, const char* url, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.backend = g_member_backend;
  o.rank = rank;
  o.size = MEMBERS;
  o.init_method = url;
  o.timeout_ms = 20000;
  return gang_create(&o, g);
}

static const char* g_joiner_backend = NULL;

static gang_status_t join(const char* url, int64_t timeout_ms, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.backend = g_joiner_backend;
  o.init_method = url;
  o.timeout_ms = timeout_ms;
  return gang_join(&o, g);
}

/* Members 0..2, then one joiner (rank 3) that is admitted. */
static int admitted(int rank, int size, const char* url, void* arg) {
  gang_t* g = NULL;
  gang_t* grown = NULL;
  int64_t t0, mine, sum = 0;
  (void)size;
  (void)arg;
  if (rank == MEMBERS) {
    CHECK_OK(join(url, 20000, &grown));
  } else {
    CHECK_OK(member_gang(rank, url, &g));
    /* Steps until the joiner has asked: every member sees the same result. */
    t0 = gang_test_now_ms();
    for (;;) {
      CHECK_OK(gang_barrier(g, NULL)); /* a training step */
      CHECK_OK(gang_grow(g, 0, &grown));
      if (grown != NULL) break;
      CHECK(gang_test_now_ms() - t0 < 20000, "the joiner was never admitted");
      gang_test_sleep_ms(20);
    }
  }
  CHECK(gang_size(grown) == MEMBERS + 1, "grown to %d ranks", gang_size(grown));
  CHECK(gang_rank(grown) == rank, "rank %d in the grown gang, want %d", gang_rank(grown),
        rank);
  CHECK(strcmp(gang_name(grown), "root/grow1") == 0, "named \"%s\"", gang_name(grown));
  mine = rank;
  CHECK_OK(gang_all_reduce(grown, &mine, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == 0 + 1 + 2 + 3, "sum %lld", (long long)sum);
  CHECK_OK(gang_destroy(grown));
  if (g != NULL) CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_joiner_admitted(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(MEMBERS + 1, admitted, NULL, WALL_S), 0);
}

/* A joiner that gives up before anyone grows; a grow afterwards admits
 * nobody. */
static int withdrawn(int rank, int size, const char* url, void* arg) {
  gang_t* g = NULL;
  gang_t* grown = NULL;
  int64_t t0;
  (void)size;
  (void)arg;
  if (rank == MEMBERS) {
    /* Asks only once the members looked and found nobody. */
    CHECK(gang_test_wait_shared(SLOT_LOOKED, MEMBERS, 20000) == 0,
          "the members never looked for joiners");
    t0 = gang_test_now_ms();
    CHECK_STATUS(join(url, 800, &grown), GANG_ERR_TIMEOUT);
    CHECK(grown == NULL, "a joiner that timed out got a gang");
    CHECK(gang_test_now_ms() - t0 < 5000, "the joiner took %lld ms to give up",
          (long long)(gang_test_now_ms() - t0));
    CHECK(strstr(gang_last_error(), "gang_grow") != NULL,
          "the timeout does not say what admits joiners: %s", gang_last_error());
    __atomic_store_n(&gang_test_shared_ints()[SLOT_GAVE_UP], 1, __ATOMIC_SEQ_CST);
    return 0;
  }
  CHECK_OK(member_gang(rank, url, &g));
  /* Nobody asked yet: NULL at once. */
  CHECK_OK(gang_grow(g, 0, &grown));
  CHECK(grown == NULL, "gang_grow admitted a joiner that never asked");
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_LOOKED], 1, __ATOMIC_SEQ_CST);
  CHECK(gang_test_wait_shared(SLOT_GAVE_UP, 1, 20000) == 0, "the joiner never gave up");
  CHECK_OK(gang_barrier(g, NULL));
  CHECK_OK(gang_grow(g, 0, &grown));
  CHECK(grown == NULL, "gang_grow admitted a joiner that had withdrawn");
  CHECK_OK(gang_barrier(g, NULL)); /* the gang works as before */
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_joiner_withdrawn(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(MEMBERS + 1, withdrawn, NULL, WALL_S), 0);
}

/* Grows until a joiner came in (or the deadline): the grown gang. */
static int grow_until_admitted(gang_t* g, int64_t limit_ms, gang_t** grown) {
  const int64_t t0 = gang_test_now_ms();
  for (;;) {
    CHECK_OK(gang_barrier(g, NULL));
    CHECK_OK(gang_grow(g, 0, grown));
    if (*grown != NULL) return 0;
    CHECK(gang_test_now_ms() - t0 < limit_ms, "no joiner was admitted");
    gang_test_sleep_ms(20);
  }
}

/* Joiner 3 dies right after taking its ticket, joiner 4 right after saying
 * what it asks for, joiner 5 is healthy: the members skip the two (naming
 * them in the log) and admit the third, within the detection interval. */
#define SLOT_ASKED 3
#define DETECT_MS 1000

static int dead_joiners(int rank, int size, const char* url, void* arg) {
  gang_t* g = NULL;
  gang_t* grown = NULL;
  int64_t mine, sum = 0, t0;
  (void)size;
  (void)arg;
  if (rank == MEMBERS || rank == MEMBERS + 1) {
    /* One at a time, so their tickets come in rank order. */
    CHECK(gang_test_wait_shared(SLOT_ASKED, rank - MEMBERS, 20000) == 0, "turn");
    setenv("GANG_FAULT_POINT", rank == MEMBERS ? "join.ticket" : "join.asked", 1);
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_ASKED], 1, __ATOMIC_SEQ_CST);
    join(url, 20000, &grown);
    fprintf(stderr, "joiner %d outlived its death\n", rank);
    return 1;
  }
  if (rank == MEMBERS + 2) {
    CHECK(gang_test_wait_shared(SLOT_ASKED, 2, 20000) == 0, "the dying joiners never asked");
    gang_test_sleep_ms(300); /* both are dead by now */
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_ASKED], 1, __ATOMIC_SEQ_CST);
    CHECK_OK(join(url, 20000, &grown));
  } else {
    CHECK_OK(member_gang(rank, url, &g));
    CHECK(gang_test_wait_shared(SLOT_ASKED, 3, 20000) == 0, "the joiners never asked");
    gang_test_sleep_ms(100);
    t0 = gang_test_now_ms();
    if (grow_until_admitted(g, 20000, &grown)) return 1;
    CHECK(gang_test_now_ms() - t0 <= DETECT_MS + 2000, "gang_grow took %lld ms",
          (long long)(gang_test_now_ms() - t0));
  }
  CHECK(gang_size(grown) == MEMBERS + 1, "grown to %d ranks", gang_size(grown));
  mine = 1;
  CHECK_OK(gang_all_reduce(grown, &mine, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == MEMBERS + 1, "sum %lld", (long long)sum);
  CHECK_OK(gang_destroy(grown));
  if (g != NULL) CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_dead_joiners_skipped(void** s) {
  gang_test_opts_t o;
  (void)s;
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  gang_test_opts_init(&o);
  o.size = MEMBERS + 3;
  o.plain_fn = dead_joiners;
  o.wall_timeout_s = WALL_S;
  o.killed_rank = MEMBERS;
  o.killed_rank2 = MEMBERS + 1;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_FAILURE_DETECT_MS");
}

/* Joiner 3 dies after it was admitted (it read its place, and never says
 * hello to the grown gang), joiner 4 is healthy and admitted with it: the
 * grown gang's rendezvous finds joiner 3 lost, and members and joiner 4
 * meet again without it, within the detection interval. Members on
 * g_member_backend. */
#define SLOT_TURN 4

static int dies_admitted(int rank, int size, const char* url, void* arg) {
  gang_t* g = NULL;
  gang_t* grown = NULL;
  int64_t mine, sum = 0, t0;
  (void)size;
  (void)arg;
  if (rank == MEMBERS) {
    setenv("GANG_FAULT_POINT", "join.admitted", 1);
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_TURN], 1, __ATOMIC_SEQ_CST);
    join(url, 20000, &grown);
    fprintf(stderr, "joiner %d outlived its death\n", rank);
    return 1;
  }
  if (rank == MEMBERS + 1) {
    CHECK(gang_test_wait_shared(SLOT_TURN, 1, 20000) == 0, "the dying joiner never asked");
    gang_test_sleep_ms(150); /* it has its ticket */
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_TURN], 1, __ATOMIC_SEQ_CST);
    CHECK_OK(join(url, 20000, &grown));
  } else {
    CHECK_OK(member_gang(rank, url, &g));
    CHECK(gang_test_wait_shared(SLOT_TURN, 2, 20000) == 0, "the joiners never asked");
    gang_test_sleep_ms(300); /* both have their tickets */
    t0 = gang_test_now_ms();
    CHECK_OK(gang_barrier(g, NULL));
    CHECK_OK(gang_grow(g, 0, &grown));
    CHECK(grown != NULL, "gang_grow admitted nobody");
    CHECK(gang_test_now_ms() - t0 <= DETECT_MS + 2000, "gang_grow took %lld ms",
          (long long)(gang_test_now_ms() - t0));
  }
  CHECK(gang_size(grown) == MEMBERS + 1, "grown to %d ranks", gang_size(grown));
  CHECK(gang_rank(grown) == (rank < MEMBERS ? rank : MEMBERS), "rank %d in the grown gang",
        gang_rank(grown));
  CHECK(strcmp(gang_name(grown), "root/grow1") == 0, "named \"%s\"", gang_name(grown));
  if (g_member_backend != NULL) {
    CHECK(strcmp(gang_backend_name(grown), g_member_backend) == 0, "grown on %s",
          gang_backend_name(grown));
  }
  mine = 1;
  CHECK_OK(gang_all_reduce(grown, &mine, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == MEMBERS + 1, "sum %lld", (long long)sum);
  CHECK_OK(gang_destroy(grown));
  if (g != NULL) CHECK_OK(gang_destroy(g));
  return 0;
}

static void run_dies_admitted(const char* backend) {
  gang_test_opts_t o;
  g_member_backend = backend;
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  gang_test_opts_init(&o);
  o.size = MEMBERS + 2;
  o.plain_fn = dies_admitted;
  o.wall_timeout_s = WALL_S;
  o.killed_rank = MEMBERS;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_FAILURE_DETECT_MS");
  g_member_backend = NULL;
}

static void test_joiner_dies_admitted(void** s) {
  (void)s;
  run_dies_admitted(NULL);
}

static void test_joiner_dies_admitted_gloo(void** s) {
  (void)s;
  run_dies_admitted("gloo");
}

/* The grown gang's steps, each with a gang_grow, until both refused joiners
 * have returned (agreed by all): nobody is admitted. */
static int grow_none(gang_t* grown) {
  const int64_t t0 = gang_test_now_ms();
  for (;;) {
    gang_t* none = NULL;
    int64_t done = gang_test_shared_ints()[SLOT_GAVE_UP] >= 2, all = 0;
    CHECK_OK(gang_all_reduce(grown, &done, &all, 1, GANG_INT64, GANG_MIN, NULL));
    if (all) break;
    CHECK_OK(gang_grow(grown, 0, &none));
    CHECK(none == NULL, "a refused joiner was admitted");
    CHECK(gang_test_now_ms() - t0 < 20000, "the refused never returned");
    gang_test_sleep_ms(20);
  }
  CHECK_OK(gang_barrier(grown, NULL));
  CHECK_OK(gang_destroy(grown));
  return 0;
}

/* Members on gloo: a joiner asking for "auto" joins the grown gang on
 * gloo; then one asking for shm, and a fake one, are refused at once. */
static int keeps_backend(int rank, int size, const char* url, void* arg) {
  gang_t* g = NULL;
  gang_t* grown = NULL;
  int64_t t0;
  (void)size;
  (void)arg;
  if (rank == MEMBERS) {
    CHECK_OK(join(url, 20000, &grown));
    CHECK(strcmp(gang_backend_name(grown), "gloo") == 0, "the joiner is on %s",
          gang_backend_name(grown));
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_ASKED], 1, __ATOMIC_SEQ_CST);
    return grow_none(grown);
  }
  if (rank == MEMBERS + 1 || rank == MEMBERS + 2) {
    CHECK(gang_test_wait_shared(SLOT_ASKED, 1, 20000) == 0, "the first joiner never came in");
    g_joiner_backend = rank == MEMBERS + 1 ? "shm" : "fake";
    t0 = gang_test_now_ms();
    CHECK_STATUS(join(url, 20000, &grown), GANG_ERR_INVALID_ARGUMENT);
    CHECK(gang_test_now_ms() - t0 < 5000, "refused after %lld ms",
          (long long)(gang_test_now_ms() - t0));
    CHECK(strstr(gang_last_error(), g_joiner_backend) != NULL, "message: %s",
          gang_last_error());
    if (rank == MEMBERS + 1) {
      CHECK(strstr(gang_last_error(), "gloo") != NULL, "message: %s", gang_last_error());
    }
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_GAVE_UP], 1, __ATOMIC_SEQ_CST);
    return 0;
  }
  g_member_backend = "gloo";
  CHECK_OK(member_gang(rank, url, &g));
  if (grow_until_admitted(g, 20000, &grown)) return 1;
  CHECK(strcmp(gang_backend_name(grown), "gloo") == 0, "grew onto %s",
        gang_backend_name(grown));
  CHECK_OK(gang_destroy(g));
  return grow_none(grown);
}

static void test_grow_keeps_backend(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(MEMBERS + 3, keeps_backend, NULL, WALL_S), 0);
}

/* Ranks that ask gang_create for different backends fail at once, each
 * naming both. */
static int asks_differ(int rank, int size, const char* url, void* arg) {
  gang_options_t o;
  gang_t* g = NULL;
  int64_t t0 = gang_test_now_ms();
  (void)arg;
  gang_options_init(&o);
  o.backend = rank == 1 ? "shm" : "gloo";
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.timeout_ms = 20000;
  CHECK_STATUS(gang_create(&o, &g), GANG_ERR_MISMATCH);
  CHECK(gang_test_now_ms() - t0 < 5000, "refused after %lld ms",
        (long long)(gang_test_now_ms() - t0));
  CHECK(strstr(gang_last_error(), "shm") != NULL && strstr(gang_last_error(), "gloo") != NULL,
        "message: %s", gang_last_error());
  return 0;
}

static void test_create_backends_differ(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, asks_differ, NULL, WALL_S), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_joiner_admitted),
      cmocka_unit_test(test_joiner_withdrawn),
      cmocka_unit_test(test_dead_joiners_skipped),
      cmocka_unit_test(test_joiner_dies_admitted),
      cmocka_unit_test(test_joiner_dies_admitted_gloo),
      cmocka_unit_test(test_grow_keeps_backend),
      cmocka_unit_test(test_create_backends_differ),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
