/*
 * test_after_loss.c - gangs_split_after_loss: a rank of a parallel layout
 * is SIGKILLed in an all-reduce, the survivors shrink and carve the layout
 * after the loss. Every active rank checks its new tp, pp and dp gangs
 * (ranks, sizes, and which old ranks they hold, through gang_root_rank)
 * and all-reduces in each the old ranks of its members, so a wrong member
 * shows in the sum; the spares get no gangs. Everyone then meets once more
 * in the shrunk gang, which the spares still belong to. The backend is
 * GANG_TEST_BACKEND (gloo by default).
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

#define TIMEOUT_MS 5000
#define WALL_S 90
#define SLOT_READY 1 /* ranks in their blocking call */

typedef struct loss_case {
  int tp, pp;
  const char* order;
  int victim;
  /* Worked out by hand: the old ranks of the new ranks, then the spares,
   * each ending in -1; the new dp. */
  int active[8];
  int spares[8];
  int dp;
} loss_case_t;

static int index_of(const int* list, int r) {
  for (int i = 0; list[i] >= 0; ++i)
    if (list[i] == r) return i;
  return -1;
}

static void parent_kill(const pid_t* pids, int size, void* arg) {
  const loss_case_t* c = (const loss_case_t*)arg;
  if (gang_test_wait_shared(SLOT_READY, size, 20000) != 0)
    fprintf(stderr, "parent: the ranks never got ready; killing anyway\n");
  gang_test_sleep_ms(300); /* the others are blocked in their all-reduce */
  gang_test_kill(pids, c->victim);
}

/* Checks one axis's gang: its size, this rank's place, its members' old
 * ranks (gang_root_rank: the old gang was the root), and an all-reduce of
 * those old ranks. want lists the old ranks, ending in -1. */
static int check_axis(gangs_t* gangs, gang_axis_t axis, int old_rank,
                      const int* want) {
  gang_t* g = gangs_get(gangs, axis);
  int n = 0;
  int64_t want_sum = 0, mine = old_rank, sum = 0;
  CHECK(g != NULL, "no %s gang", gang_axis_name(axis));
  while (want[n] >= 0) want_sum += want[n++];
  CHECK(gang_size(g) == n, "%s gang of %d ranks, want %d", gang_axis_name(axis),
        gang_size(g), n);
  CHECK(gang_rank(g) == index_of(want, old_rank), "rank %d of the %s gang, want %d",
        gang_rank(g), gang_axis_name(axis), index_of(want, old_rank));
  for (int i = 0; i < n; ++i) {
    CHECK(gang_root_rank(g, i) == want[i], "%s gang rank %d was old rank %d, want %d",
          gang_axis_name(axis), i, gang_root_rank(g, i), want[i]);
  }
  CHECK_OK(gang_all_reduce(g, &mine, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == want_sum, "%s gang: the sum of its old ranks is %lld, want %lld",
        gang_axis_name(axis), (long long)sum, (long long)want_sum);
  return 0;
}

/* The old ranks of the group of new_rank on `axis` in the new layout: the
 * layout's new ranks mapped through the hand-computed active list. */
static void group_old_ranks(const loss_case_t* c, const gang_parallel_config_t* now,
                            gang_axis_t axis, int new_rank, int* out) {
  int ranks[8];
  size_t n = 0;
  if (gang_layout_ranks(c->dp * c->tp * c->pp, now, axis, new_rank, ranks, 8, &n) !=
      GANG_OK) {
    out[0] = -1;
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = c->active[ranks[i]];
  out[n] = -1;
}

static int rank_after_loss(gang_t* g, int rank, int size, void* arg) {
  static float x[1 << 14], y[1 << 14];
  const loss_case_t* c = (const loss_case_t*)arg;
  gang_t* small = NULL;
  gangs_t* gangs = NULL;
  gang_parallel_config_t cfg, now;
  gang_status_t s;
  gang_parallel_config_init(&cfg);
  cfg.tp = c->tp;
  cfg.pp = c->pp;
  cfg.order = c->order;
  now = cfg;
  now.dp = c->dp;

  CHECK_OK(gang_barrier(g, NULL));
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_READY], 1, __ATOMIC_SEQ_CST);
  if (rank == c->victim) {
    gang_test_sleep_ms(60000); /* killed long before this ends */
    return 1;
  }
  s = gang_all_reduce(g, x, y, 1 << 14, GANG_FLOAT32, GANG_SUM, NULL);
  CHECK(s == GANG_ERR_PEER_LOST || s == GANG_ERR_ABORTED || s == GANG_ERR_TIMEOUT,
        "the blocked call returned %s", gang_status_name(s));
  CHECK_OK(gang_shrink(g, 0, &small));
  CHECK(gang_size(small) == size - 1, "shrunk to %d ranks", gang_size(small));

  gangs = (gangs_t*)&cfg; /* must come back NULL on a spare */
  CHECK_OK(gangs_split_after_loss(g, small, &cfg, &gangs));
  if (index_of(c->spares, rank) >= 0) {
    CHECK(gangs == NULL, "spare %d got gangs", rank);
  } else {
    const int new_rank = index_of(c->active, rank);
    int want[9];
    CHECK(new_rank >= 0, "rank %d is neither active nor a spare", rank);
    CHECK(gangs != NULL, "active rank %d got no gangs", rank);
    /* The root: every active rank, in new-rank order. */
    {
      gang_t* root = gangs_get(gangs, GANG_AXIS_ROOT);
      char name[256];
      snprintf(name, sizeof name, "%s/loss0", gang_name(small));
      CHECK(root != NULL && root != small, "the root is not a gang of its own");
      CHECK(strcmp(gang_name(root), name) == 0, "root named \"%s\", want \"%s\"",
            gang_name(root), name);
    }
    memcpy(want, c->active, sizeof c->active);
    want[8] = -1;
    if (check_axis(gangs, GANG_AXIS_ROOT, rank, want) != 0) return 1;
    CHECK(gang_size(gangs_get(gangs, GANG_AXIS_DP)) == c->dp, "dp gang of %d, want %d",
          gang_size(gangs_get(gangs, GANG_AXIS_DP)), c->dp);
    static const gang_axis_t axes[] = {GANG_AXIS_TP, GANG_AXIS_PP, GANG_AXIS_DP,
                                       GANG_AXIS_MP, GANG_AXIS_SDP};
    for (size_t a = 0; a < sizeof axes / sizeof axes[0]; ++a) {
      group_old_ranks(c, &now, axes[a], new_rank, want);
      CHECK(want[0] >= 0, "gang_layout_ranks: %s", gang_last_error());
      if (check_axis(gangs, axes[a], rank, want) != 0) return 1;
    }
    CHECK_OK(gangs_destroy(gangs));
  }
  /* Spares and active ranks still share the shrunk gang. */
  CHECK_OK(gang_barrier(small, NULL));
  CHECK_OK(gang_destroy(small));
  return 0;
}

static void run(loss_case_t c) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = 8;
  o.fn = rank_after_loss;
  o.arg = &c;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  o.parent_fn = parent_kill;
  o.killed_rank = c.victim;
  assert_int_equal(gang_test_run(&o), 0);
}

/* 8 ranks, tp=2 (dp=4: replicas [0,1] [2,3] [4,5] [6,7]), rank 3 lost: dp=3
 * on old ranks [0,1,4,5,6,7], old rank 2 a spare (gang.h's example). */
static void test_tp2_rank3_lost(void** s) {
  (void)s;
  run((loss_case_t){2, 1, NULL, 3, {0, 1, 4, 5, 6, 7, -1}, {2, -1}, 3});
}

/* Megatron's order, tp=2 pp=2 (dp=2: rank = tp + 2*dp + 4*pp, replicas
 * {0,1,4,5} {2,3,6,7}), rank 6 lost: dp=1 on old ranks [0,1,4,5], whose pp
 * gangs are [0,4] and [1,5]; 2, 3 and 7 are spares. */
static void test_megatron_tp2_pp2_rank6_lost(void** s) {
  (void)s;
  run((loss_case_t){2, 2, "tp-cp-dp-pp", 6, {0, 1, 4, 5, -1}, {2, 3, 7, -1}, 1});
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tp2_rank3_lost),
      cmocka_unit_test(test_megatron_tp2_pp2_rank6_lost),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
