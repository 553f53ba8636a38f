/*
 * test_grow.c - gang_join and gang_grow: a new process asks to join a
 * running 3-rank gang and the members admit it at a step boundary (the
 * grown gang has the members first, then the joiner, and all-reduces
 * right); a joiner nobody admits times out cleanly and is not counted by a
 * later gang_grow; gang_grow with no joiner returns NULL at once.
 */
#define _GNU_SOURCE
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

#define MEMBERS 3
#define WALL_S 90
#define SLOT_GAVE_UP 1  /* the joiner that timed out has returned */
#define SLOT_LOOKED 2   /* members whose first gang_grow returned */

static gang_status_t member_gang(int rank, const char* url, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.rank = rank;
  o.size = MEMBERS;
  o.init_method = url;
  o.timeout_ms = 20000;
  return gang_create(&o, g);
}

static gang_status_t join(const char* url, int64_t timeout_ms, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
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

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_joiner_admitted),
      cmocka_unit_test(test_joiner_withdrawn),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
