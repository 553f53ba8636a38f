/*
 * test_compose.c - membership calls on a gang and on its sub-gangs
 * compose, and a grow composes with a loss:
 *   - a sub-gang's gang_grow never takes a joiner that asked for the root
 *     (it admits nobody), and the root's then admits it;
 *   - split, then a rank dies: one survivor shrinks its sub-gang first, and
 *     everyone then shrinks the root; nobody is left alone or out;
 *   - a member dies as the members call gang_grow (before the decision):
 *     the grow fails, the survivors shrink and grow again, and the waiting
 *     joiner comes in then;
 *   - a member dies after the decision, before the grown gang met: the
 *     survivors' grow fails within the detection interval naming it, the
 *     admitted joiner's gang_join is aborted ("join again"), and it comes
 *     in at the survivors' next grow.
 * Every case ends with an exact all-reduce on the final gang, whose
 * members all agree on its name and size. Backend: GANG_TEST_BACKEND
 * (auto by default).
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

#define MEMBERS 4
#define JOINER MEMBERS /* the harness rank of the joiner */
#define VICTIM 3
#define DETECT_MS 1000
#define WALL_S 90

#define S_ASKED 0    /* the joiner has its ticket */
#define S_BLOCKED 1  /* members blocked in the all-reduce the victim leaves */
#define S_NAME 8     /* S_NAME + rank: a hash of the final gang's name */
#define S_SIZE 16    /* S_SIZE + rank: the final gang's size */

static const char* backend(void) { return getenv("GANG_TEST_BACKEND"); }

static gang_status_t member_gang(int rank, const char* url, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.backend = backend();
  o.rank = rank;
  o.size = MEMBERS;
  o.init_method = url;
  o.timeout_ms = 15000;
  return gang_create(&o, g);
}

static gang_status_t join(const char* url, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.init_method = url;
  o.timeout_ms = 20000;
  return gang_join(&o, g);
}

static int64_t hash(const char* s) {
  uint64_t h = 1469598103934665603ull;
  while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return (int64_t)(h >> 1);
}

/* Records the final gang and checks an all-reduce of ones on it. */
static int finish(gang_t* g, int rank) {
  int64_t one = 1, sum = 0;
  CHECK_OK(gang_all_reduce(g, &one, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == gang_size(g), "sum %lld on %d ranks", (long long)sum, gang_size(g));
  gang_test_shared_ints()[S_NAME + rank] = hash(gang_name(g));
  gang_test_shared_ints()[S_SIZE + rank] = gang_size(g);
  return 0;
}

/* Every rank in `ranks` (ending in -1) finished in the same gang of
 * `size`. */
static void expect_same(const int* ranks, int size) {
  for (int i = 0; ranks[i] >= 0; ++i) {
    assert_int_equal(gang_test_shared_ints()[S_SIZE + ranks[i]], size);
    assert_true(gang_test_shared_ints()[S_NAME + ranks[i]] ==
                gang_test_shared_ints()[S_NAME + ranks[0]]);
  }
}

/* The members' grow, step after step, until someone came in. */
static int grow_until(gang_t* g, gang_t** grown) {
  const int64_t t0 = gang_test_now_ms();
  *grown = NULL;
  while (*grown == NULL) {
    CHECK_OK(gang_barrier(g, NULL));
    CHECK_OK(gang_grow(g, 0, grown));
    CHECK(gang_test_now_ms() - t0 < 20000, "nobody came in");
    if (*grown == NULL) gang_test_sleep_ms(20);
  }
  return 0;
}

/* ---- a sub-gang's grow leaves the root's joiner alone ------------------- */

static int sub_grow(int rank, int size, const char* url, void* arg) {
  gang_t *g = NULL, *sub = NULL, *none = NULL, *grown = NULL;
  (void)size;
  (void)arg;
  if (rank == JOINER) {
    __atomic_store_n(&gang_test_shared_ints()[S_ASKED], 1, __ATOMIC_SEQ_CST);
    CHECK_OK(join(url, &grown));
  } else {
    CHECK_OK(member_gang(rank, url, &g));
    CHECK_OK(gang_split(g, rank / 2, rank, &sub));
    CHECK(gang_test_wait_shared(S_ASKED, 1, 20000) == 0, "the joiner never asked");
    gang_test_sleep_ms(200); /* it has its ticket */
    CHECK_OK(gang_grow(sub, 0, &none));
    CHECK(none == NULL, "the sub-gang took the root's joiner (grew to %d)", gang_size(none));
    CHECK_OK(gang_barrier(sub, NULL)); /* the sub-gang is as it was */
    if (grow_until(g, &grown)) return 1;
    CHECK(gang_rank(grown) == rank, "rank %d in the grown gang", gang_rank(grown));
    CHECK_OK(gang_destroy(sub));
  }
  if (finish(grown, rank)) return 1;
  CHECK_OK(gang_destroy(grown));
  if (g != NULL) CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_sub_gang_grow(void** s) {
  static const int all[] = {0, 1, 2, 3, JOINER, -1};
  (void)s;
  assert_int_equal(gang_test_run_procs(MEMBERS + 1, sub_grow, NULL, WALL_S), 0);
  expect_same(all, MEMBERS + 1);
}

/* ---- split, then a loss ------------------------------------------------- */

static void kill_victim(const pid_t* pids, int size, void* arg) {
  (void)size;
  (void)arg;
  if (gang_test_wait_shared(S_BLOCKED, MEMBERS - 1, 20000) != 0)
    fprintf(stderr, "parent: the members never blocked; killing anyway\n");
  gang_test_sleep_ms(200);
  gang_test_kill(pids, VICTIM);
}

/* Blocks in an all-reduce the victim never joins; the failure it ends
 * with. */
static gang_status_t lose_victim(gang_t* g) {
  int64_t one = 1, sum = 0;
  __atomic_add_fetch(&gang_test_shared_ints()[S_BLOCKED], 1, __ATOMIC_SEQ_CST);
  return gang_all_reduce(g, &one, &sum, 1, GANG_INT64, GANG_SUM, NULL);
}

static int split_shrink(int rank, int size, const char* url, void* arg) {
  gang_t *g = NULL, *sub = NULL, *small = NULL, *sub_small = NULL;
  gang_status_t st;
  (void)size;
  (void)arg;
  CHECK_OK(member_gang(rank, url, &g));
  CHECK_OK(gang_split(g, rank / 2, rank, &sub));
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == VICTIM) {
    for (;;) pause();
  }
  st = lose_victim(g);
  CHECK(st == GANG_ERR_PEER_LOST || st == GANG_ERR_ABORTED, "the all-reduce returned %s",
        gang_status_name(st));
  if (rank == 2) {
    /* The victim's sub-gang first: rank 2 is its only survivor. */
    CHECK_OK(gang_shrink(sub, 10000, &sub_small));
    CHECK(gang_size(sub_small) == 1, "the sub-gang shrank to %d", gang_size(sub_small));
    if (finish(sub_small, rank)) return 1;
    CHECK_OK(gang_destroy(sub_small));
  }
  CHECK_OK(gang_shrink(g, 10000, &small));
  CHECK(gang_rank(small) == rank, "rank %d in the shrunk gang", gang_rank(small));
  if (finish(small, rank)) return 1;
  CHECK_OK(gang_destroy(small));
  CHECK_OK(gang_destroy(sub));
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_split_then_shrink(void** s) {
  static const int survivors[] = {0, 1, 2, -1};
  gang_test_opts_t o;
  (void)s;
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  gang_test_opts_init(&o);
  o.size = MEMBERS;
  o.plain_fn = split_shrink;
  o.parent_fn = kill_victim;
  o.killed_rank = VICTIM;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_FAILURE_DETECT_MS");
  expect_same(survivors, MEMBERS - 1);
}

/* ---- a grow meets a loss ------------------------------------------------ */

/* `decided`: the victim dies after the grow's decision (a fault point),
 * else it is killed while the others are in gang_grow's first step. */
static int grow_loss(int rank, int size, const char* url, void* arg) {
  const int decided = *(const int*)arg;
  gang_t *g = NULL, *small = NULL, *grown = NULL;
  gang_status_t st;
  (void)size;
  if (rank == JOINER) {
    __atomic_store_n(&gang_test_shared_ints()[S_ASKED], 1, __ATOMIC_SEQ_CST);
    st = join(url, &grown);
    if (decided) {
      /* Admitted by the grow the victim broke: told to join again. */
      CHECK(st == GANG_ERR_ABORTED, "the first gang_join returned %s", gang_status_name(st));
      CHECK(strstr(gang_last_error(), "join again") != NULL, "%s", gang_last_error());
      CHECK_OK(join(url, &grown));
    } else {
      CHECK_OK(st);
    }
    CHECK(gang_rank(grown) == MEMBERS - 1, "the joiner is rank %d", gang_rank(grown));
  } else {
    int64_t t0;
    CHECK_OK(member_gang(rank, url, &g));
    CHECK(gang_test_wait_shared(S_ASKED, 1, 20000) == 0, "the joiner never asked");
    gang_test_sleep_ms(200); /* it has its ticket */
    if (rank == VICTIM) {
      if (!decided) {
        for (;;) pause(); /* killed while the others are in gang_grow */
      }
      setenv("GANG_FAULT_POINT", "grow.decided", 1);
    } else if (!decided) {
      __atomic_add_fetch(&gang_test_shared_ints()[S_BLOCKED], 1, __ATOMIC_SEQ_CST);
    }
    t0 = gang_test_now_ms();
    st = gang_grow(g, 10000, &grown);
    CHECK(rank != VICTIM, "the victim outlived its death");
    CHECK(st == GANG_ERR_PEER_LOST || st == GANG_ERR_ABORTED, "gang_grow returned %s",
          gang_status_name(st));
    CHECK(gang_test_now_ms() - t0 < DETECT_MS + 2500, "gang_grow failed after %lld ms",
          (long long)(gang_test_now_ms() - t0));
    if (decided) {
      CHECK(strstr(gang_last_error(), "rank 3") != NULL, "does not name rank 3: %s",
            gang_last_error());
    }
    CHECK_OK(gang_shrink(g, 10000, &small));
    CHECK(gang_size(small) == MEMBERS - 1, "shrank to %d", gang_size(small));
    if (grow_until(small, &grown)) return 1;
    CHECK_OK(gang_destroy(small));
  }
  if (finish(grown, rank)) return 1;
  CHECK_OK(gang_destroy(grown));
  if (g != NULL) CHECK_OK(gang_destroy(g));
  return 0;
}

static void run_grow_loss(int decided) {
  static const int final_ranks[] = {0, 1, 2, JOINER, -1};
  gang_test_opts_t o;
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  gang_test_opts_init(&o);
  o.size = MEMBERS + 1;
  o.plain_fn = grow_loss;
  o.arg = &decided;
  o.parent_fn = decided ? NULL : kill_victim;
  o.killed_rank = VICTIM;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_FAILURE_DETECT_MS");
  expect_same(final_ranks, MEMBERS);
}

static void test_grow_meets_loss(void** s) {
  (void)s;
  run_grow_loss(0);
}

static void test_member_lost_after_decision(void** s) {
  (void)s;
  run_grow_loss(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sub_gang_grow),
      cmocka_unit_test(test_split_then_shrink),
      cmocka_unit_test(test_grow_meets_loss),
      cmocka_unit_test(test_member_lost_after_decision),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
