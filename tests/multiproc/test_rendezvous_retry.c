/*
 * test_rendezvous_retry.c - a failed or abandoned gang_create never poisons
 * the store: an immediate retry under the same name works, so does a
 * different size under that name, and ranks that disagree on the size fail
 * with GANG_ERR_MISMATCH instead of hanging.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define WALL_S 90
#define ROUNDS 8

static gang_status_t create(gang_store_t* store, int rank, int size,
                            int64_t timeout_ms, gang_t** out) {
  gang_options_t o;
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = timeout_ms;
  o.name = "retried";
  return gang_create(&o, out);
}

static int sums_right(gang_t* g, int size) {
  int64_t x = gang_rank(g) + 1, y = 0;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == (int64_t)size * (size + 1) / 2, "sum %lld", (long long)y);
  return 0;
}

/* Each round: rank 2 stays away, so ranks 0 and 1 time out; then all three
 * retry at once on the same store and name, and that must work. */
static int proc_retry(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  int round;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  for (round = 0; round < ROUNDS; ++round) {
    gang_t* g = NULL;
    int64_t t0;
    if (rank != 2) {
      t0 = gang_test_now_ms();
      CHECK_STATUS(create(store, rank, size, 500, &g), GANG_ERR_TIMEOUT);
      CHECK(g == NULL, "a failed creation returned a gang");
      CHECK(gang_test_now_ms() - t0 < 500 + 2000, "the failed creation took %lld ms",
            (long long)(gang_test_now_ms() - t0));
    }
    /* Everyone, the late rank included, retries now. */
    gang_test_shared_ints()[100 + rank] = round + 1;
    {
      int r;
      for (r = 0; r < size; ++r) {
        CHECK(gang_test_wait_shared(100 + r, round + 1, 20000) == 0,
              "rank %d did not reach round %d", r, round);
      }
    }
    t0 = gang_test_now_ms();
    CHECK_OK(create(store, rank, size, 20000, &g));
    if (sums_right(g, size) != 0) return 1;
    CHECK_OK(gang_destroy(g));
  }
  gang_store_destroy(store);
  return 0;
}

static void test_immediate_retry(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, proc_retry, NULL, WALL_S), 0);
}

/* Size 3, then size 2 and size 4 under the same name on the same store. */
static int proc_resize(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  static const int sizes[] = {3, 2, 4, 1, 3};
  size_t i;
  (void)arg;
  (void)size;
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    gang_t* g = NULL;
    if (rank < sizes[i]) {
      CHECK_OK(create(store, rank, sizes[i], 20000, &g));
      if (sums_right(g, sizes[i]) != 0) return 1;
      CHECK_OK(gang_destroy(g));
    }
    /* Everyone finishes this size before anyone starts the next. */
    gang_test_shared_ints()[200 + 8 * (int)i + rank] = 1;
    {
      int r;
      for (r = 0; r < 4; ++r) {
        CHECK(gang_test_wait_shared(200 + 8 * (int)i + r, 1, 20000) == 0,
              "rank %d did not finish size %d", r, sizes[i]);
      }
    }
  }
  gang_store_destroy(store);
  return 0;
}

static void test_different_sizes_same_name(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(4, proc_resize, NULL, WALL_S), 0);
}

/* Rank 0 says size 2, rank 1 says size 3 (and rank 2 stays out): both get
 * GANG_ERR_MISMATCH naming the two sizes, well before the timeout. */
static int proc_disagree(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_t* g = NULL;
  int64_t t0;
  (void)arg;
  (void)size;
  if (rank == 2) return 0;
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  t0 = gang_test_now_ms();
  CHECK_STATUS(create(store, rank, rank == 0 ? 2 : 3, 10000, &g),
               GANG_ERR_MISMATCH);
  CHECK(strstr(gang_last_error(), "size 2") != NULL &&
            strstr(gang_last_error(), "size 3") != NULL,
        "the message does not name both sizes: %s", gang_last_error());
  CHECK(gang_test_now_ms() - t0 < 5000, "took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  gang_store_destroy(store);
  return 0;
}

static void test_sizes_disagree(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, proc_disagree, NULL, WALL_S), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_immediate_retry),
      cmocka_unit_test(test_different_sizes_same_name),
      cmocka_unit_test(test_sizes_disagree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
