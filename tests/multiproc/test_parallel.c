/* gangs_split_parallel over real processes: every axis's gang reduces over
 * exactly the ranks the pure layout names, bad configurations fail on every
 * rank and leave the root usable, and the time to build all axes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

typedef struct {
  int tp, cp, pp, ep, sdp;
  const char* order;
} layout_arg_t;

static gang_parallel_config_t config_of(const layout_arg_t* a) {
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  cfg.tp = a->tp ? a->tp : 1;
  cfg.cp = a->cp ? a->cp : 1;
  cfg.pp = a->pp ? a->pp : 1;
  cfg.ep = a->ep ? a->ep : 1;
  cfg.sdp = a->sdp ? a->sdp : -1;
  cfg.order = a->order;
  return cfg;
}

/* Every axis: SUM of (root rank + 1) over the axis's gang equals the sum
 * over the layout's ranks, and the gang's ranks map back to them. */
static int every_axis_reduces_over_its_ranks(gang_t* g, int rank, int size,
                                             void* arg) {
  const gang_parallel_config_t cfg = config_of(arg);
  gangs_t* gangs = NULL;
  const int64_t t0 = gang_test_now_ms();
  CHECK_OK(gangs_split_parallel(g, &cfg, &gangs));
  const int64_t elapsed = gang_test_now_ms() - t0;
  gang_test_shared_ints()[rank] = elapsed;
  CHECK(gangs_get(gangs, GANG_AXIS_ROOT) == g, "root is not the gang itself");
  for (int axis = 0; axis <= GANG_AXIS_DPCP; ++axis) {
    gang_t* a = gangs_get(gangs, (gang_axis_t)axis);
    CHECK(a != NULL, "axis %s has no gang", gang_axis_name((gang_axis_t)axis));
    int ranks[64];
    size_t n = 0;
    CHECK_OK(gang_layout_ranks(size, &cfg, (gang_axis_t)axis, rank, ranks, 64, &n));
    CHECK(gang_size(a) == (int)n, "%s: size %d, layout says %zu",
          gang_axis_name((gang_axis_t)axis), gang_size(a), n);
    CHECK(ranks[gang_rank(a)] == rank, "%s: rank %d is not at its position",
          gang_axis_name((gang_axis_t)axis), gang_rank(a));
    int64_t want = 0;
    for (size_t i = 0; i < n; ++i) {
      CHECK(gang_root_rank(a, (int)i) == ranks[i], "%s: member %zu maps to %d",
            gang_axis_name((gang_axis_t)axis), i, gang_root_rank(a, (int)i));
      want += ranks[i] + 1;
    }
    int64_t x = rank + 1, sum = 0;
    CHECK_OK(gang_all_reduce(a, &x, &sum, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(sum == want, "%s: sum %lld, want %lld", gang_axis_name((gang_axis_t)axis),
          (long long)sum, (long long)want);
  }
  CHECK_OK(gangs_destroy(gangs));
  /* The root outlives its parallel gangs. */
  int64_t x = 1, total = 0;
  CHECK_OK(gang_all_reduce(g, &x, &total, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(total == size, "root sum %lld", (long long)total);
  return 0;
}

static void run_layout(int size, layout_arg_t a, const char* what) {
  assert_int_equal(gang_test_run_ranks(size, "gloo", every_axis_reduces_over_its_ranks,
                                       &a, 30000, 120),
                   0);
  int64_t slowest = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t t = gang_test_shared_ints()[r];
    slowest = t > slowest ? t : slowest;
  }
  printf("gangs_split_parallel %s on %d ranks: %lld ms (slowest rank)\n", what,
         size, (long long)slowest);
}

static void seed_layout_8_ranks(void** state) {
  (void)state;
  run_layout(8, (layout_arg_t){.tp = 2, .pp = 2}, "tp=2 pp=2 dp=2");
}

static void megatron_layout_8_ranks(void** state) {
  (void)state;
  run_layout(8, (layout_arg_t){.tp = 2, .cp = 2, .ep = 2, .order = "tp-cp-dp-pp"},
             "tp=2 cp=2 dp=2 ep=2 order tp-cp-dp-pp");
}

static void fsdp_layout_8_ranks(void** state) {
  (void)state;
  run_layout(8, (layout_arg_t){.sdp = 4}, "dp=8 sdp=4");
}

static void seed_layout_4_ranks(void** state) {
  (void)state;
  run_layout(4, (layout_arg_t){.tp = 2}, "tp=2 dp=2");
}

static void odd_layout_6_ranks(void** state) {
  (void)state;
  run_layout(6, (layout_arg_t){.tp = 3}, "tp=3 dp=2");
}

/* Bad configurations: INVALID_ARGUMENT naming the sizes on every rank, and
 * the root still works. A configuration that differs between ranks is a
 * mismatch everywhere. */
static int bad_configs(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  gang_parallel_config_t cfg;
  gang_parallel_config_init(&cfg);
  cfg.tp = 3;
  gangs_t* gangs = NULL;
  CHECK_STATUS(gangs_split_parallel(g, &cfg, &gangs), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "tp*cp*pp (3) must divide the gang size (8)"),
        "message: %s", gang_last_error());
  cfg.tp = 2;
  cfg.ep = 3;
  CHECK_STATUS(gangs_split_parallel(g, &cfg, &gangs), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "ep (3) must divide dp*cp (4)"), "message: %s",
        gang_last_error());
  cfg.ep = 1;
  cfg.order = "tp-pp";
  CHECK_STATUS(gangs_split_parallel(g, &cfg, &gangs), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "leaves out \"dp\" of degree 4"), "message: %s",
        gang_last_error());
  CHECK(gangs == NULL, "gangs set on failure");

  int64_t x = 1, total = 0;
  CHECK_OK(gang_all_reduce(g, &x, &total, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(total == size, "root sum %lld after bad configs", (long long)total);

  /* Rank 0 asks for tp=4, the others for tp=2: valid everywhere, but not the
   * same layout. */
  gang_parallel_config_init(&cfg);
  cfg.tp = rank == 0 ? 4 : 2;
  CHECK_STATUS(gangs_split_parallel(g, &cfg, &gangs), GANG_ERR_MISMATCH);
  CHECK(strstr(gang_last_error(), "different configuration"), "message: %s",
        gang_last_error());
  CHECK_OK(gang_all_reduce(g, &x, &total, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(total == size, "root sum %lld after a mismatch", (long long)total);
  return 0;
}

static void bad_configs_fail_on_every_rank(void** state) {
  (void)state;
  assert_int_equal(gang_test_run_ranks(8, "gloo", bad_configs, NULL, 30000, 120), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_layout_4_ranks),
      cmocka_unit_test(seed_layout_8_ranks),
      cmocka_unit_test(megatron_layout_8_ranks),
      cmocka_unit_test(fsdp_layout_8_ranks),
      cmocka_unit_test(odd_layout_6_ranks),
      cmocka_unit_test(bad_configs_fail_on_every_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
