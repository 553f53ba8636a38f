/* The layout after a lost rank (gang_layout_after_loss) against cases
 * worked out by hand, and gangs_split_after_loss where it needs no
 * processes. */
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

#define MAXR 64

typedef gang_test_degrees_t cfg_t;

/* "[a,b,c]" of n ints. */
static const char* list(const int* v, size_t n, char* buf, size_t len) {
  size_t at = (size_t)snprintf(buf, len, "[");
  for (size_t i = 0; i < n && at < len; ++i) {
    at += (size_t)snprintf(buf + at, len - at, i ? ",%d" : "%d", v[i]);
  }
  if (at < len) snprintf(buf + at, len - at, "]");
  return buf;
}

/* The survivors of `size` ranks: all but the `nlost` ranks of `lost`. */
static size_t survivors_of(int size, const int* lost, size_t nlost, int* out) {
  size_t n = 0;
  for (int r = 0; r < size; ++r) {
    int gone = 0;
    for (size_t i = 0; i < nlost; ++i) gone |= lost[i] == r;
    if (!gone) out[n++] = r;
  }
  return n;
}

/* Checks the layout after losing `lost`: the new dp, the active ranks in
 * new-rank order and the spares (survivors not active, ascending). */
static void expect(int size, cfg_t c, const int* lost, size_t nlost,
                   int want_dp, const char* want_active,
                   const char* want_spares) {
  gang_parallel_config_t cfg = gang_test_parallel_config(c);
  int survivors[MAXR];
  const size_t ns = survivors_of(size, lost, nlost, survivors);
  gang_parallel_config_t now;
  gang_parallel_config_init(&now);
  int active[MAXR];
  size_t n = 0;
  gang_status_t s = gang_layout_after_loss(size, &cfg, survivors, ns, &now,
                                           active, MAXR, &n);
  if (s != GANG_OK) fail_msg("gang_layout_after_loss: %s", gang_last_error());
  char got[512], buf[512];
  if (strcmp(list(active, n, got, sizeof got), want_active) != 0) {
    fail_msg("active: got %s, want %s", got, want_active);
  }
  int spares[MAXR];
  size_t nspares = 0;
  for (size_t i = 0; i < ns; ++i) {
    int is_active = 0;
    for (size_t j = 0; j < n; ++j) is_active |= active[j] == survivors[i];
    if (!is_active) spares[nspares++] = survivors[i];
  }
  if (strcmp(list(spares, nspares, got, sizeof got), want_spares) != 0) {
    fail_msg("spares: got %s, want %s", got, want_spares);
  }
  assert_int_equal(now.struct_size, sizeof now);
  assert_int_equal(now.dp, want_dp);
  assert_int_equal(now.tp, cfg.tp);
  assert_int_equal(now.cp, cfg.cp);
  assert_int_equal(now.pp, cfg.pp);
  assert_int_equal(now.ep, cfg.ep);
  assert_int_equal(now.sdp, cfg.sdp);
  assert_ptr_equal(now.order, cfg.order);
  assert_int_equal(n, (size_t)(want_dp * cfg.tp * cfg.cp * cfg.pp));
  /* The new configuration lays out the active ranks. */
  size_t m = 0;
  s = gang_layout_ranks((int)n, &now, GANG_AXIS_ROOT, 0, active, MAXR, &m);
  if (s != GANG_OK) fail_msg("gang_layout_ranks: %s", gang_last_error());
  assert_int_equal(m, n);
  (void)buf;
}

/* The groups of `axis` in the new layout, as old ranks: "[a,b] [c,d]". */
static void expect_new_groups(int size, cfg_t c, const int* lost,
                              size_t nlost, gang_axis_t axis,
                              const char* want) {
  gang_parallel_config_t cfg = gang_test_parallel_config(c);
  int survivors[MAXR], active[MAXR], ranks[MAXR], old[MAXR];
  const size_t ns = survivors_of(size, lost, nlost, survivors);
  gang_parallel_config_t now;
  gang_parallel_config_init(&now);
  size_t n = 0;
  assert_int_equal(gang_layout_after_loss(size, &cfg, survivors, ns, &now,
                                          active, MAXR, &n),
                   GANG_OK);
  char got[1024] = "", one[256];
  for (int r = 0; r < (int)n; ++r) {
    size_t m = 0;
    assert_int_equal(
        gang_layout_ranks((int)n, &now, axis, r, ranks, MAXR, &m), GANG_OK);
    if (ranks[0] != r) continue;
    for (size_t i = 0; i < m; ++i) old[i] = active[ranks[i]];
    strcat(got, got[0] ? " " : "");
    strcat(got, list(old, m, one, sizeof one));
  }
  if (strcmp(got, want) != 0) {
    fail_msg("%s groups: got %s, want %s", gang_axis_name(axis), got, want);
  }
}

/* The call fails with INVALID_ARGUMENT and a message containing `what`. */
static void expect_refused(int size, cfg_t c, const int* survivors, size_t ns,
                           const char* what) {
  gang_parallel_config_t cfg = gang_test_parallel_config(c);
  gang_parallel_config_t now;
  gang_parallel_config_init(&now);
  int active[MAXR];
  size_t n = 99;
  gang_status_t s = gang_layout_after_loss(size, &cfg, survivors, ns, &now,
                                           active, MAXR, &n);
  assert_int_equal(s, GANG_ERR_INVALID_ARGUMENT);
  if (strstr(gang_last_error(), what) == NULL) {
    fail_msg("message \"%s\" lacks \"%s\"", gang_last_error(), what);
  }
  assert_int_equal(now.dp, -1); /* untouched */
}

static void the_documented_example(void** state) {
  (void)state;
  /* 8 ranks, tp=2: replicas [0,1] [2,3] [4,5] [6,7]; rank 3 lost. */
  const int lost[] = {3};
  expect(8, (cfg_t){.tp = 2}, lost, 1, 3, "[0,1,4,5,6,7]", "[2]");
  expect_new_groups(8, (cfg_t){.tp = 2}, lost, 1, GANG_AXIS_TP,
                    "[0,1] [4,5] [6,7]");
  expect_new_groups(8, (cfg_t){.tp = 2}, lost, 1, GANG_AXIS_DP,
                    "[0,4,6] [1,5,7]");
}

static void default_and_megatron_orders(void** state) {
  (void)state;
  /* 12 ranks, tp=2 pp=2 dp=3, rank 3 lost.
   * Default order, rank = tp + 2*pp + 4*dp: replicas [0..3] [4..7] [8..11];
   * the first is broken. */
  const int lost[] = {3};
  cfg_t c = {.tp = 2, .pp = 2};
  expect(12, c, lost, 1, 2, "[4,5,6,7,8,9,10,11]", "[0,1,2]");
  expect_new_groups(12, c, lost, 1, GANG_AXIS_PP, "[4,6] [5,7] [8,10] [9,11]");
  /* Megatron's "tp-cp-dp-pp", rank = tp + 2*dp + 6*pp: replicas
   * {0,1,6,7} {2,3,8,9} {4,5,10,11}; the second is broken, and the kept
   * ones interleave with it. */
  c.order = "tp-cp-dp-pp";
  expect(12, c, lost, 1, 2, "[0,1,4,5,6,7,10,11]", "[2,8,9]");
  expect_new_groups(12, c, lost, 1, GANG_AXIS_PP, "[0,6] [1,7] [4,10] [5,11]");
  expect_new_groups(12, c, lost, 1, GANG_AXIS_DP, "[0,4] [1,5] [6,10] [7,11]");
  expect_new_groups(12, c, lost, 1, GANG_AXIS_TP, "[0,1] [4,5] [6,7] [10,11]");
}

static void context_and_pipeline(void** state) {
  (void)state;
  /* cp=2, dp=4: rank = cp + 2*dp; rank 0 lost. */
  const int lost0[] = {0};
  expect(8, (cfg_t){.cp = 2}, lost0, 1, 3, "[2,3,4,5,6,7]", "[1]");
  expect_new_groups(8, (cfg_t){.cp = 2}, lost0, 1, GANG_AXIS_CP,
                    "[2,3] [4,5] [6,7]");
  /* Full shard stays full: sdp = dp*cp = 6, rdp of one. */
  expect_new_groups(8, (cfg_t){.cp = 2}, lost0, 1, GANG_AXIS_SDP,
                    "[2,3,4,5,6,7]");
  /* pp=3, dp=4: replicas [0,1,2] [3,4,5] [6,7,8] [9,10,11]; 5 and 6 lost
   * break the middle two. */
  const int lost56[] = {5, 6};
  expect(12, (cfg_t){.pp = 3}, lost56, 2, 2, "[0,1,2,9,10,11]", "[3,4,7,8]");
  expect_new_groups(12, (cfg_t){.pp = 3}, lost56, 2, GANG_AXIS_DP,
                    "[0,9] [1,10] [2,11]");
}

static void sdp_and_ep_drop_more(void** state) {
  (void)state;
  /* dp=8, sdp=2: 7 whole replicas, but sdp must divide dp, so dp=6 and the
   * highest kept replica (7) becomes a spare. */
  const int lost5[] = {5};
  expect(8, (cfg_t){.sdp = 2}, lost5, 1, 6, "[0,1,2,3,4,6]", "[7]");
  expect_new_groups(8, (cfg_t){.sdp = 2}, lost5, 1, GANG_AXIS_SDP,
                    "[0,1] [2,3] [4,6]");
  /* cp=2, dp=8, sdp=4: dp*cp must be a multiple of 4, so dp even; rank 0
   * lost leaves 7 replicas, 6 kept (1..6). */
  const int lost0[] = {0};
  expect(16, (cfg_t){.cp = 2, .sdp = 4}, lost0, 1, 6,
         "[2,3,4,5,6,7,8,9,10,11,12,13]", "[1,14,15]");
  /* ep=4 must divide dp*cp: dp=8 with rank 2 lost keeps 4. */
  const int lost2[] = {2};
  expect(8, (cfg_t){.ep = 4}, lost2, 1, 4, "[0,1,3,4]", "[5,6,7]");
  expect_new_groups(8, (cfg_t){.ep = 4}, lost2, 1, GANG_AXIS_EP, "[0,1,3,4]");
  /* tp=2 ep=2 over dp=4: rank 7 lost leaves 3 replicas, 2 kept. */
  const int lost7[] = {7};
  expect(8, (cfg_t){.tp = 2, .ep = 2}, lost7, 1, 2, "[0,1,2,3]", "[4,5,6]");
}

static void nothing_or_whole_replicas_lost(void** state) {
  (void)state;
  /* Nothing lost: the same layout, dp made explicit; survivors in any
   * order. */
  gang_parallel_config_t cfg = gang_test_parallel_config((cfg_t){.tp = 2, .pp = 2,
                                                .order = "tp-cp-dp-pp"});
  const int all[] = {7, 6, 5, 4, 3, 2, 1, 0};
  gang_parallel_config_t now;
  gang_parallel_config_init(&now);
  int active[MAXR];
  size_t n = 0;
  assert_int_equal(
      gang_layout_after_loss(8, &cfg, all, 8, &now, active, MAXR, &n),
      GANG_OK);
  assert_int_equal(n, 8);
  for (int i = 0; i < 8; ++i) assert_int_equal(active[i], i);
  assert_int_equal(now.dp, 2);
  assert_string_equal(now.order, "tp-cp-dp-pp");
  /* A whole replica lost: no spares. */
  const int lost23[] = {2, 3};
  expect(8, (cfg_t){.tp = 2}, lost23, 2, 3, "[0,1,4,5,6,7]", "[]");
  /* dp=1 stays dp=1 when nothing of it is lost. */
  expect(4, (cfg_t){.tp = 4}, NULL, 0, 1, "[0,1,2,3]", "[]");
}

static void no_layout_fits(void** state) {
  (void)state;
  /* tp=2 over 4 ranks: 1 and 2 lost break both replicas. */
  const int s03[] = {0, 3};
  expect_refused(4, (cfg_t){.tp = 2}, s03, 2,
                 "no data-parallel replica survived whole");
  expect_refused(4, (cfg_t){.tp = 2}, NULL, 0,
                 "no data-parallel replica survived whole");
  /* ep=2 over dp=2: one replica left, and ep=2 does not divide 1. */
  const int s1[] = {1};
  expect_refused(2, (cfg_t){.ep = 2}, s1, 1, "no dp of 1 or fewer fits");
  /* The old configuration itself must fit. */
  const int s0[] = {0};
  expect_refused(6, (cfg_t){.tp = 4}, s0, 1, "must divide the gang size (6)");
}

static void bad_survivors(void** state) {
  (void)state;
  const int twice[] = {0, 1, 1, 2};
  expect_refused(4, (cfg_t){0}, twice, 4, "survivors[2] (1) is listed twice");
  const int high[] = {8};
  expect_refused(8, (cfg_t){0}, high, 1,
                 "survivors[0] (8) is out of range for a gang of size 8");
  const int low[] = {0, -1};
  expect_refused(8, (cfg_t){0}, low, 2, "survivors[1] (-1) is out of range");
  expect_refused(8, (cfg_t){0}, NULL, 3, "survivors is NULL");
}

static void capacity_and_outputs(void** state) {
  (void)state;
  gang_parallel_config_t cfg = gang_test_parallel_config((cfg_t){.tp = 2});
  const int survivors[] = {0, 1, 2, 4, 5, 6, 7};
  gang_parallel_config_t now;
  gang_parallel_config_init(&now);
  int active[MAXR];
  size_t n = 0;
  /* Too small: the count needed, nothing else written. */
  assert_int_equal(gang_layout_after_loss(8, &cfg, survivors, 7, &now,
                                          active, 5, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(n, 6);
  assert_int_equal(now.dp, -1);
  assert_non_null(strstr(gang_last_error(), "capacity 5 is below the 6"));
  assert_int_equal(gang_layout_after_loss(8, &cfg, survivors, 7, &now, NULL,
                                          0, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(n, 6);
  /* Exactly enough. */
  assert_int_equal(gang_layout_after_loss(8, &cfg, survivors, 7, &now,
                                          active, 6, &n),
                   GANG_OK);
  assert_int_equal(now.dp, 3);
  /* In place: new_config may be config. */
  assert_int_equal(gang_layout_after_loss(8, &cfg, survivors, 7, &cfg,
                                          active, 6, &n),
                   GANG_OK);
  assert_int_equal(cfg.dp, 3);
  assert_int_equal(cfg.tp, 2);
  /* new_config's struct_size is checked, as any sized struct's. */
  cfg = gang_test_parallel_config((cfg_t){.tp = 2});
  gang_parallel_config_t raw;
  memset(&raw, 0, sizeof raw);
  assert_int_equal(gang_layout_after_loss(8, &cfg, survivors, 7, &raw,
                                          active, MAXR, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "new_config.struct_size"));
}

/* Without processes, gangs_split_after_loss only refuses. */
static void split_on_fake_gangs(void** state) {
  (void)state;
  gang_t* g = NULL;
  assert_int_equal(gang_create_fake(0, 4, &g), GANG_OK);
  gang_parallel_config_t cfg = gang_test_parallel_config((cfg_t){.tp = 2});
  gangs_t* out = (gangs_t*)&cfg;
  assert_int_equal(gangs_split_after_loss(g, g, &cfg, &out),
                   GANG_ERR_UNSUPPORTED);
  assert_null(out);
  assert_non_null(strstr(gang_last_error(), "gangs_split_after_loss"));
  assert_int_equal(gang_destroy(g), GANG_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_documented_example),
      cmocka_unit_test(default_and_megatron_orders),
      cmocka_unit_test(context_and_pipeline),
      cmocka_unit_test(sdp_and_ep_drop_more),
      cmocka_unit_test(nothing_or_whole_replicas_lost),
      cmocka_unit_test(no_layout_fits),
      cmocka_unit_test(bad_survivors),
      cmocka_unit_test(capacity_and_outputs),
      cmocka_unit_test(split_on_fake_gangs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
