/* The parallel layout as pure functions (gang_layout_ranks) and on fake
 * gangs (gangs_split_parallel without processes). */
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

/* Fills out with rank's group; returns its size. */
static size_t group(int size, const gang_parallel_config_t* cfg,
                    gang_axis_t axis, int rank, int* out) {
  size_t n = 0;
  gang_status_t s = gang_layout_ranks(size, cfg, axis, rank, out, MAXR, &n);
  if (s != GANG_OK) fail_msg("gang_layout_ranks: %s", gang_last_error());
  return n;
}

/* Asserts that the groups of `axis` over `size` ranks are exactly `expect`,
 * a string like "[0,1] [2,3]" listing each group once at its lowest rank. */
static void expect_groups(int size, cfg_t c, gang_axis_t axis,
                          const char* expect) {
  gang_parallel_config_t cfg = gang_test_parallel_config(c);
  char buf[2048] = "";
  int ranks[MAXR];
  for (int r = 0; r < size; ++r) {
    size_t n = group(size, &cfg, axis, r, ranks);
    if (ranks[0] != r) continue;
    size_t len = strlen(buf);
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s[", len ? " " : "");
    for (size_t i = 0; i < n; ++i) {
      len += (size_t)snprintf(buf + len, sizeof buf - len, i ? ",%d" : "%d",
                              ranks[i]);
    }
    snprintf(buf + len, sizeof buf - len, "]");
  }
  if (strcmp(buf, expect) != 0) {
    fail_msg("%s: got %s, want %s", gang_axis_name(axis), buf, expect);
  }
}

static void seed_builders_8_ranks(void** state) {
  (void)state;
  cfg_t c = {.tp = 2, .pp = 2, .dp = 2};
  expect_groups(8, c, GANG_AXIS_TP, "[0,1] [2,3] [4,5] [6,7]");
  expect_groups(8, c, GANG_AXIS_PP, "[0,2] [1,3] [4,6] [5,7]");
  expect_groups(8, c, GANG_AXIS_DP, "[0,4] [1,5] [2,6] [3,7]");
}

static void fairseq2_layouts(void** state) {
  (void)state;
  expect_groups(8, (cfg_t){.tp = 2}, GANG_AXIS_DP, "[0,2,4,6] [1,3,5,7]");
  expect_groups(8, (cfg_t){.tp = 2}, GANG_AXIS_TP, "[0,1] [2,3] [4,5] [6,7]");
  expect_groups(8, (cfg_t){.sdp = 4}, GANG_AXIS_SDP, "[0,1,2,3] [4,5,6,7]");
  expect_groups(8, (cfg_t){.sdp = 4}, GANG_AXIS_RDP, "[0,4] [1,5] [2,6] [3,7]");
  /* Full shard by default: one sdp gang, rdp of size 1. */
  expect_groups(4, (cfg_t){0}, GANG_AXIS_SDP, "[0,1,2,3]");
  expect_groups(4, (cfg_t){0}, GANG_AXIS_RDP, "[0] [1] [2] [3]");
}

static void megatron_order(void** state) {
  (void)state;
  cfg_t c = {.tp = 2, .pp = 2, .cp = 2, .dp = 2, .order = "tp-cp-dp-pp"};
  expect_groups(16, c, GANG_AXIS_CP, "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
  expect_groups(16, c, GANG_AXIS_DP, "[0,4] [1,5] [2,6] [3,7] [8,12] [9,13] [10,14] [11,15]");
  expect_groups(16, c, GANG_AXIS_PP, "[0,8] [1,9] [2,10] [3,11] [4,12] [5,13] [6,14] [7,15]");
  expect_groups(16, c, GANG_AXIS_DPCP, "[0,2,4,6] [1,3,5,7] [8,10,12,14] [9,11,13,15]");
  expect_groups(16, c, GANG_AXIS_MP, "[0,1,8,9] [2,3,10,11] [4,5,12,13] [6,7,14,15]");
  c.ep = 2;
  /* ep: contiguous pairs of each dpcp gang; edp: the strided rest. */
  expect_groups(16, c, GANG_AXIS_EP, "[0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]");
  expect_groups(16, c, GANG_AXIS_EDP, "[0,4] [1,5] [2,6] [3,7] [8,12] [9,13] [10,14] [11,15]");
}

static void expect_invalid(int size, cfg_t c, const char* message) {
  gang_parallel_config_t cfg = gang_test_parallel_config(c);
  int ranks[MAXR];
  size_t n = 0;
  assert_int_equal(gang_layout_ranks(size, &cfg, GANG_AXIS_DP, 0, ranks, MAXR, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  if (!strstr(gang_last_error(), message)) {
    fail_msg("message \"%s\" lacks \"%s\"", gang_last_error(), message);
  }
}

static void bad_configs_name_the_sizes(void** state) {
  (void)state;
  expect_invalid(8, (cfg_t){.tp = 3, .pp = 4}, "tp*cp*pp (12) must divide the gang size (8)");
  expect_invalid(8, (cfg_t){.sdp = 3, .dp = 4, .tp = 2}, "sdp (3) must divide dp*cp (4)");
  expect_invalid(8, (cfg_t){.ep = 3, .tp = 2}, "ep (3) must divide dp*cp (4)");
  expect_invalid(8, (cfg_t){.tp = 4, .order = "tp-pp"}, "order \"tp-pp\" leaves out \"dp\" of degree 2");
  expect_invalid(8, (cfg_t){.order = "tp-tp-dp"}, "names \"tp\" twice");
  expect_invalid(8, (cfg_t){.order = "tp-xx-dp"}, "unknown axis \"xx\"");
  expect_invalid(8, (cfg_t){.tp = -2}, "tp (-2) must be at least 1");
  expect_invalid(8, (cfg_t){.dp = 3}, "tp*cp*pp*dp (3) must equal the gang size (8)");
  /* Capacity too small reports the size needed. */
  gang_parallel_config_t cfg = gang_test_parallel_config((cfg_t){.tp = 4});
  int ranks[2];
  size_t n = 0;
  assert_int_equal(gang_layout_ranks(8, &cfg, GANG_AXIS_TP, 0, ranks, 2, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(n, 4);
  /* A bad axis or struct_size. */
  assert_int_equal(gang_layout_ranks(8, &cfg, (gang_axis_t)11, 0, ranks, 2, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "axis 11"));
  cfg.struct_size = 8;
  assert_int_equal(gang_layout_ranks(8, &cfg, GANG_AXIS_TP, 0, ranks, 2, &n),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "struct_size"));
}

/* ---- properties over every factorisation ---------------------------------- */

static const char* const kAxes4[4] = {"tp", "cp", "pp", "dp"};

static int contains(const int* v, size_t n, int x) {
  for (size_t i = 0; i < n; ++i) {
    if (v[i] == x) return 1;
  }
  return 0;
}

static size_t intersect(const int* a, size_t na, const int* b, size_t nb) {
  size_t k = 0;
  for (size_t i = 0; i < na; ++i) k += (size_t)contains(b, nb, a[i]);
  return k;
}

static long g_layouts = 0;

/* Checks one configuration: partitions, degrees, coordinates, orthogonality.
 * perm lists the dense axes (0 tp, 1 cp, 2 pp, 3 dp) fastest first. */
static void check_layout(int size, const int deg[4], const int perm[4], int ep,
                         int sdp) {
  char order[32];
  snprintf(order, sizeof order, "%s-%s-%s-%s", kAxes4[perm[0]], kAxes4[perm[1]],
           kAxes4[perm[2]], kAxes4[perm[3]]);
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  cfg.tp = deg[0];
  cfg.cp = deg[1];
  cfg.pp = deg[2];
  cfg.ep = ep;
  cfg.sdp = sdp;
  cfg.order = order;
  const gang_axis_t dense[4] = {GANG_AXIS_TP, GANG_AXIS_CP, GANG_AXIS_PP, GANG_AXIS_DP};
  int stride[4], s = 1;
  for (int i = 0; i < 4; ++i) {
    stride[perm[i]] = s;
    s *= deg[perm[i]];
  }
  const int dpcp = deg[3] * deg[1];
  const int expect_degree[11] = {size,   deg[3], deg[0], deg[2], deg[1], ep,
                                 dpcp / ep, sdp, dpcp / sdp, deg[0] * deg[2], dpcp};
  ++g_layouts;
  for (int axis = 0; axis <= GANG_AXIS_DPCP; ++axis) {
    int owner[MAXR];
    for (int r = 0; r < size; ++r) owner[r] = -1;
    for (int r = 0; r < size; ++r) {
      int g[MAXR];
      size_t n = group(size, &cfg, (gang_axis_t)axis, r, g);
      if ((int)n != expect_degree[axis]) {
        fail_msg("%s size %d: %s group of %d has %zu ranks, want %d", order,
                 size, gang_axis_name((gang_axis_t)axis), r, n,
                 expect_degree[axis]);
      }
      assert_true(contains(g, n, r));
      /* Partition: each group is named by its lowest member, and every
       * rank is claimed by one group only. */
      int lowest = g[0];
      for (size_t i = 0; i < n; ++i) lowest = g[i] < lowest ? g[i] : lowest;
      for (size_t i = 0; i < n; ++i) {
        if (owner[g[i]] != -1 && owner[g[i]] != lowest) {
          fail_msg("%s size %d: rank %d is in two %s groups", order, size,
                   g[i], gang_axis_name((gang_axis_t)axis));
        }
        owner[g[i]] = lowest;
      }
    }
    for (int r = 0; r < size; ++r) assert_int_not_equal(owner[r], -1);
  }
  for (int r = 0; r < size; ++r) {
    /* Coordinates: the position in each dense axis's group rebuilds r. */
    int rebuilt = 0, groups[4][MAXR];
    size_t n[4];
    for (int a = 0; a < 4; ++a) {
      n[a] = group(size, &cfg, dense[a], r, groups[a]);
      size_t pos = 0;
      while (groups[a][pos] != r) ++pos;
      rebuilt += (int)pos * stride[a];
    }
    assert_int_equal(rebuilt, r);
    /* Orthogonal axes meet in exactly one rank. */
    for (int a = 0; a < 4; ++a) {
      for (int b = a + 1; b < 4; ++b) {
        assert_int_equal(intersect(groups[a], n[a], groups[b], n[b]), 1);
      }
    }
    int x[MAXR], y[MAXR];
    size_t nx = group(size, &cfg, GANG_AXIS_MP, r, x);
    size_t ny = group(size, &cfg, GANG_AXIS_DPCP, r, y);
    assert_int_equal(intersect(x, nx, y, ny), 1);
    nx = group(size, &cfg, GANG_AXIS_EP, r, x);
    ny = group(size, &cfg, GANG_AXIS_EDP, r, y);
    assert_int_equal(intersect(x, nx, y, ny), 1);
    nx = group(size, &cfg, GANG_AXIS_SDP, r, x);
    ny = group(size, &cfg, GANG_AXIS_RDP, r, y);
    assert_int_equal(intersect(x, nx, y, ny), 1);
  }
}

static void properties_over_all_factorisations(void** state) {
  (void)state;
  static const int perms[24][4] = {
      {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2},
      {0, 3, 2, 1}, {1, 0, 2, 3}, {1, 0, 3, 2}, {1, 2, 0, 3}, {1, 2, 3, 0},
      {1, 3, 0, 2}, {1, 3, 2, 0}, {2, 0, 1, 3}, {2, 0, 3, 1}, {2, 1, 0, 3},
      {2, 1, 3, 0}, {2, 3, 0, 1}, {2, 3, 1, 0}, {3, 0, 1, 2}, {3, 0, 2, 1},
      {3, 1, 0, 2}, {3, 1, 2, 0}, {3, 2, 0, 1}, {3, 2, 1, 0}};
  g_layouts = 0;
  for (int size = 1; size <= 64; ++size) {
    for (int tp = 1; tp <= size; ++tp) {
      if (size % tp) continue;
      for (int cp = 1; cp <= size / tp; ++cp) {
        if ((size / tp) % cp) continue;
        for (int pp = 1; pp <= size / tp / cp; ++pp) {
          if ((size / tp / cp) % pp) continue;
          const int deg[4] = {tp, cp, pp, size / tp / cp / pp};
          const int dpcp = deg[3] * cp;
          /* Every order, with the default ep and sdp ... */
          for (int p = 0; p < 24; ++p) check_layout(size, deg, perms[p], 1, dpcp);
          /* ... and every ep and sdp, with the default order. */
          for (int e = 1; e <= dpcp; ++e) {
            if (dpcp % e) continue;
            for (int sd = 1; sd <= dpcp; ++sd) {
              if (dpcp % sd == 0 && (size <= 24 || e == sd)) {
                check_layout(size, deg, perms[0], e, sd);
              }
            }
          }
        }
      }
    }
  }
  printf("layout properties: %ld configurations of sizes 1..64 checked\n",
         g_layouts);
}

/* ---- fake gangs ------------------------------------------------------------ */

static void split_parallel_on_fake_gangs(void** state) {
  (void)state;
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  cfg.tp = 2;
  cfg.pp = 2;
  for (int rank = 0; rank < 8; ++rank) {
    gang_t* root = NULL;
    assert_int_equal(gang_create_fake(rank, 8, &root), GANG_OK);
    gangs_t* gangs = NULL;
    assert_int_equal(gangs_split_parallel(root, &cfg, &gangs), GANG_OK);
    assert_ptr_equal(gangs_get(gangs, GANG_AXIS_ROOT), root);
    for (int axis = 1; axis <= GANG_AXIS_DPCP; ++axis) {
      gang_t* g = gangs_get(gangs, (gang_axis_t)axis);
      assert_non_null(g);
      int ranks[MAXR];
      size_t n = group(8, &cfg, (gang_axis_t)axis, rank, ranks);
      assert_int_equal(gang_size(g), (int)n);
      assert_string_equal(gang_backend_name(g), "fake");
      /* Its rank is our position in the layout's list, and its members map
       * back to the root's ranks. */
      assert_int_equal(ranks[gang_rank(g)], rank);
      for (size_t i = 0; i < n; ++i) {
        assert_int_equal(gang_root_rank(g, (int)i), ranks[i]);
      }
      /* A collective works on it: SUM over the fake gang is x*size. */
      float x = 1.5f, y = 0;
      assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_FLOAT32, GANG_SUM, NULL),
                       GANG_OK);
      assert_true(y == 1.5f * (float)n);
    }
    /* Identical rank sets share a handle: cp and ep are both size 1 here,
     * and dp equals dpcp. */
    assert_ptr_equal(gangs_get(gangs, GANG_AXIS_CP), gangs_get(gangs, GANG_AXIS_EP));
    assert_ptr_equal(gangs_get(gangs, GANG_AXIS_DP), gangs_get(gangs, GANG_AXIS_DPCP));
    assert_null(gangs_get(gangs, (gang_axis_t)42));
    assert_int_equal(gangs_destroy(gangs), GANG_OK);
    /* The root survives its parallel gangs. */
    assert_int_equal(gang_barrier(root, NULL), GANG_OK);
    assert_int_equal(gang_destroy(root), GANG_OK);
  }
  assert_int_equal(gangs_destroy(NULL), GANG_OK);
}

static void bad_config_leaves_the_gang_usable(void** state) {
  (void)state;
  gang_t* root = NULL;
  assert_int_equal(gang_create_fake(0, 8, &root), GANG_OK);
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  cfg.tp = 3;
  gangs_t* gangs = (gangs_t*)1;
  assert_int_equal(gangs_split_parallel(root, &cfg, &gangs), GANG_ERR_INVALID_ARGUMENT);
  assert_null(gangs);
  assert_non_null(strstr(gang_last_error(), "tp*cp*pp (3) must divide the gang size (8)"));
  assert_int_equal(gangs_split_parallel(NULL, &cfg, &gangs), GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(gangs_split_parallel(root, NULL, &gangs), GANG_ERR_INVALID_ARGUMENT);
  cfg.tp = 2;
  assert_int_equal(gangs_split_parallel(root, &cfg, &gangs), GANG_OK);
  assert_int_equal(gangs_destroy(gangs), GANG_OK);
  assert_int_equal(gang_destroy(root), GANG_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_builders_8_ranks),
      cmocka_unit_test(fairseq2_layouts),
      cmocka_unit_test(megatron_order),
      cmocka_unit_test(bad_configs_name_the_sizes),
      cmocka_unit_test(properties_over_all_factorisations),
      cmocka_unit_test(split_parallel_on_fake_gangs),
      cmocka_unit_test(bad_config_leaves_the_gang_usable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
