/*
 * test_shm_attach.c - attaching to an shm gang's segment when a rank is
 * lost on the way.
 *
 * The ranks count themselves in in the segment, and only rank 0 waits on
 * the store; a rank that cannot attach says so through the store (see
 * multiproc.hang's failed attach). Here a rank dies at shm.attach, after
 * it mapped the segment and before it counted itself in
 * (GANG_FAULT_POINT, set in that rank alone):
 * - a rank other than 0: every other rank's gang_create fails with
 *   GANG_ERR_TIMEOUT at the gang's deadline, naming it as the one that did
 *   not attach;
 * - rank 0: the others see its process end and fail with
 *   GANG_ERR_PEER_LOST naming rank 0 at once, long before the deadline.
 * The store is the harness's, so it outlives every rank.
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

#define MSG_BYTES 2048
#define RANKS 3

typedef struct {
  int lost;          /* the rank that dies at shm.attach */
  int64_t timeout_ms;
} Case;

static char* shared_text(int rank) {
  return (char*)gang_test_shared() + (size_t)rank * MSG_BYTES;
}

static int create_losing_one(int rank, int size, const char* url, void* arg) {
  const Case* c = arg;
  gang_store_t* store = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t s;
  int64_t t0;
  if (rank == c->lost) setenv("GANG_FAULT_POINT", "shm.attach:kill", 1);
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  gang_options_init(&o);
  o.backend = "shm";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = c->timeout_ms;
  t0 = gang_test_now_ms();
  s = gang_create(&o, &g);
  snprintf(shared_text(rank), MSG_BYTES, "%s (%lld ms): %s", gang_status_name(s),
           (long long)(gang_test_now_ms() - t0), s == GANG_OK ? "" : gang_last_error());
  if (g) gang_destroy(g);
  gang_store_destroy(store);
  return 0;
}

/* Runs the case; every rank but the lost one must have failed with `want`
 * within `within_ms`, and named the lost rank in words containing `names`. */
static void run_case(int lost, int64_t timeout_ms, const char* want,
                     int64_t within_ms, const char* names) {
  Case c = {lost, timeout_ms};
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = RANKS;
  o.plain_fn = create_losing_one;
  o.arg = &c;
  o.killed_rank = lost;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  for (int r = 0; r < RANKS; ++r) {
    if (r == lost) continue;
    const char* m = shared_text(r);
    long long ms = -1;
    printf("rank %d lost: rank %d: %s\n", lost, r, m);
    if (strncmp(m, want, strlen(want)) != 0) fail_msg("rank %d: not %s: %s", r, want, m);
    if (sscanf(strchr(m, '(') + 1, "%lld", &ms) != 1 || ms > within_ms) {
      fail_msg("rank %d took longer than %lld ms: %s", r, (long long)within_ms, m);
    }
    if (!strstr(m, names)) fail_msg("rank %d names no \"%s\": %s", r, names, m);
  }
}

static void test_rank_lost_before_counting_in_is_named(void** s) {
  (void)s;
  /* At the deadline (3 s), not later. */
  run_case(2, 3000, "GANG_ERR_TIMEOUT", 6000, "rank 2 to attach to the shared segment");
}

static void test_rank_0_lost_fails_the_others_at_once(void** s) {
  (void)s;
  /* Well before the 20 s deadline. */
  run_case(0, 20000, "GANG_ERR_PEER_LOST", 3000, "rank 0 is gone");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rank_lost_before_counting_in_is_named),
      cmocka_unit_test(test_rank_0_lost_fails_the_others_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
