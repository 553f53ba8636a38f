/*
 * test_gloo_wide.c - broadcasts, all-reduces and scatters on a gloo gang
 * wider than the algorithms where every rank talks to every other (8
 * ranks): every algorithm the sizes pick there (the direct broadcast with
 * its ring of frames, the binomial tree, the scatter and ring all-gather;
 * all-reduce by recursive doubling and by the ring), from roots at the
 * start, the middle and the end, every element checked; then the same with
 * the tree forced (GANG_GLOO_ALGORITHM=tree) at every size.
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

#define RANKS 12

/* Bytes: inline in the frames, direct with a payload, the tree's range,
 * and the ring's (above 2.9 MiB on 12 ranks). */
static const size_t kBytes[] = {8, 4096, 65536, 1 << 20, 4 << 20};
static const int kRoots[] = {0, 7, RANKS - 1};

/* Element i of a broadcast from `root`. */
static uint32_t value(int root, size_t i) {
  return (uint32_t)(root * 2654435761u) ^ (uint32_t)(i * 40503u + 17u);
}

static int check_broadcasts(gang_t* g, int rank, int size) {
  size_t s, r, i;
  for (s = 0; s < sizeof kBytes / sizeof kBytes[0]; ++s) {
    const size_t n = kBytes[s] / sizeof(uint32_t);
    uint32_t* x = (uint32_t*)malloc(n * sizeof *x);
    CHECK(x != NULL, "malloc");
    for (r = 0; r < sizeof kRoots / sizeof kRoots[0]; ++r) {
      const int root = kRoots[r] < size ? kRoots[r] : size - 1;
      for (i = 0; i < n; ++i) x[i] = rank == root ? value(root, i) : 0xdeadbeefu;
      CHECK_OK(gang_broadcast(g, x, n, GANG_UINT32, root, NULL));
      for (i = 0; i < n; ++i) {
        CHECK(x[i] == value(root, i), "broadcast of %zu B from rank %d: element %zu is %#x",
              kBytes[s], root, i, x[i]);
      }
    }
    free(x);
  }
  return 0;
}

/* Each rank's block of a scatter from root 5: 4 elements (in the frames)
 * and 16 Ki (a payload). */
static int check_scatters(gang_t* g, int rank, int size) {
  static const size_t kCounts[] = {4, 16384};
  const int root = 5 % size;
  size_t c, i;
  for (c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
    const size_t n = kCounts[c];
    uint32_t* all = (uint32_t*)malloc(n * (size_t)size * sizeof *all);
    uint32_t* mine = (uint32_t*)malloc(n * sizeof *mine);
    CHECK(all != NULL && mine != NULL, "malloc");
    for (i = 0; i < n * (size_t)size; ++i) all[i] = value(root, i);
    memset(mine, 0, n * sizeof *mine);
    CHECK_OK(gang_scatter(g, rank == root ? all : NULL, mine, n, GANG_UINT32, root, NULL));
    for (i = 0; i < n; ++i) {
      CHECK(mine[i] == value(root, (size_t)rank * n + i),
            "scatter of %zu elements from rank %d: element %zu is %#x", n, root, i, mine[i]);
    }
    free(all);
    free(mine);
  }
  return 0;
}

/* All-reduces of 1 to 19 floats (a frame holds 18: recursive doubling
 * below, the ring above), sums of integers exactly, a max and an average;
 * then sums that round, whose bits every rank must have alike. */
static int check_all_reduces(gang_t* g, int rank, int size) {
  size_t n, i;
  int r;
  for (n = 1; n <= 19; n += 6) {
    float x[19], y[19], mixed[19];
    float* all = (float*)malloc((size_t)size * n * sizeof *all);
    int64_t k[19];
    CHECK(all != NULL, "malloc");
    for (i = 0; i < n; ++i) {
      x[i] = (float)(rank * 3 + (int)i);
      k[i] = (int64_t)rank << 33 | (int64_t)i;
      mixed[i] = 0.1f * (float)(rank + 1) + 1e-7f * (float)i;
    }
    CHECK_OK(gang_all_reduce(g, x, y, n, GANG_FLOAT32, GANG_SUM, NULL));
    for (i = 0; i < n; ++i) {
      const float want = (float)(3 * size * (size - 1) / 2 + size * (int)i);
      CHECK(y[i] == want, "sum of %zu floats: element %zu is %g, not %g", n, i, y[i], want);
    }
    CHECK_OK(gang_all_reduce(g, x, y, n, GANG_FLOAT32, GANG_MAX, NULL));
    for (i = 0; i < n; ++i) {
      CHECK(y[i] == (float)((size - 1) * 3 + (int)i), "max of %zu floats: element %zu is %g",
            n, i, y[i]);
    }
    CHECK_OK(gang_all_reduce(g, x, y, n, GANG_FLOAT32, GANG_AVG, NULL));
    for (i = 0; i < n; ++i) {
      const float want = (float)(3 * size * (size - 1) / 2 + size * (int)i) / (float)size;
      CHECK(y[i] == want, "average of %zu floats: element %zu is %g, not %g", n, i, y[i],
            want);
    }
    CHECK_OK(gang_all_reduce(g, k, k, n, GANG_INT64, GANG_SUM, NULL));
    for (i = 0; i < n; ++i) {
      const int64_t want = ((int64_t)size * (size - 1) / 2 << 33) + (int64_t)size * (int64_t)i;
      CHECK(k[i] == want, "sum of %zu int64s: element %zu is %lld", n, i, (long long)k[i]);
    }
    CHECK_OK(gang_all_reduce(g, mixed, mixed, n, GANG_FLOAT32, GANG_SUM, NULL));
    CHECK_OK(gang_all_gather(g, mixed, all, n, GANG_FLOAT32, NULL));
    for (r = 0; r < size; ++r) {
      CHECK(memcmp(all + (size_t)r * n, mixed, n * sizeof *mixed) == 0,
            "a rounded sum of %zu floats: rank %d has other bits than rank %d", n, r, rank);
    }
    free(all);
  }
  return 0;
}

static int rank_fn(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  if (check_broadcasts(g, rank, size) != 0) return 1;
  if (check_all_reduces(g, rank, size) != 0) return 1;
  return check_scatters(g, rank, size);
}

static void run(const char* algorithm) {
  gang_test_opts_t o;
  if (algorithm != NULL) {
    setenv("GANG_GLOO_ALGORITHM", algorithm, 1);
  } else {
    unsetenv("GANG_GLOO_ALGORITHM");
  }
  gang_test_opts_init(&o);
  o.size = RANKS;
  o.backend = "gloo";
  o.fn = rank_fn;
  o.gang_timeout_ms = 60000;
  o.wall_timeout_s = 120;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_GLOO_ALGORITHM");
}

static void test_auto(void** s) {
  (void)s;
  run(NULL);
}

static void test_tree(void** s) {
  (void)s;
  run("tree");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auto),
      cmocka_unit_test(test_tree),
  };
  setenv("GANG_LOG_LEVEL", "error", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
