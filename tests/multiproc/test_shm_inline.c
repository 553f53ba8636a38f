/*
 * test_shm_inline.c - shm operations whose input fits a rank's description
 * (all-reduce, reduce, all-gather, gather and reduce-scatter of up to 176
 * bytes a rank, barriers) meet by the descriptions, with no barrier and no
 * slot. Around that size, and around the all-reduce's split, every dtype
 * and op gives the reference's bits, in and out of place; ranks in
 * different operations fail with MISMATCH at once whichever side of the
 * size each is on; a rank that never comes is named in the timeout, and
 * only it; and long mixed sequences (inline, slot and split operations,
 * broadcasts that do not meet, slow ranks) stay right, on 2 to 4 ranks (3
 * and 4 on a 2-core machine: more ranks than cores, where waits do not
 * spin).
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

#define WALL_S 120
#define INLINE_BYTES 176 /* the shm backend's kInlineBytes */

/* Small integers, exact in every dtype and under every op on 4 ranks
 * (1 or 2, so that products stay at most 2^4), in a pattern of its own
 * for every rank; bool: 0 or 1. */
static uint64_t input(gang_dtype_t dt, int r, size_t j) {
  if (dt == GANG_BOOL) return (uint64_t)(((j >> r) ^ (size_t)r) & 1);
  return ref_from_int(dt, (int64_t)((j >> r) & 1) + 1);
}

/* A gathered block: a value of its own for every rank and element. */
static uint64_t block(gang_dtype_t dt, int r, size_t j) {
  if (dt == GANG_BOOL) return input(dt, r, j);
  return ref_from_int(dt, (int64_t)(r * 3 + (int)(j % 7) + 1));
}

/* The rank-order reduction of element j over n ranks. */
static uint64_t expect(gang_dtype_t dt, gang_op_t op, int n, size_t j) {
  uint64_t v = input(dt, 0, j);
  int r;
  for (r = 1; r < n; ++r) v = ref_reduce(dt, op, v, input(dt, r, j));
  return ref_finish(dt, op, v, n);
}

static int check_reduced(const char* what, gang_dtype_t dt, gang_op_t op, int n,
                         const void* got, size_t at, size_t count) {
  size_t j;
  for (j = 0; j < count; ++j) {
    const uint64_t a = ref_load(dt, got, j), b = expect(dt, op, n, at + j);
    if (a != b) {
      char ga[64], wb[64];
      gang_test_report(__FILE__, __LINE__, "result == reference",
                       "%s %s %s count %zu: element %zu is %s, expected %s", what,
                       ref_dtype_name(dt), ref_op_name(op), count, at + j,
                       ref_format(dt, a, ga, sizeof ga), ref_format(dt, b, wb, sizeof wb));
      return 1;
    }
  }
  return 0;
}

/* Counts on both sides of the inline size and just below the split. */
static size_t counts_of(gang_dtype_t dt, size_t out[4]) {
  const size_t es = ref_dtype_size(dt);
  out[0] = 1;
  out[1] = INLINE_BYTES / es;
  out[2] = INLINE_BYTES / es + 1;
  out[3] = 4095 / es;
  return 4;
}

static int rank_exact(gang_t* g, int rank, int size, void* arg) {
  static uint8_t send[4 * 4096], recv[4 * 4096];
  int d, o, in_place;
  size_t ci, j, counts[4];
  int r;
  (void)arg;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt), nc = counts_of(dt, counts);
    for (ci = 0; ci < nc; ++ci) {
      const size_t count = counts[ci];
      for (o = 0; o < REF_NUM_OPS; ++o) {
        const gang_op_t op = ref_ops[o];
        if (!ref_reducible(dt, op)) continue;
        for (in_place = 0; in_place < 2; ++in_place) {
          void* out = in_place ? send : recv;
          const int root = size - 1;
          for (j = 0; j < count; ++j) ref_store(dt, send, j, input(dt, rank, j));
          CHECK_OK(gang_all_reduce(g, send, out, count, dt, op, NULL));
          if (check_reduced("all_reduce", dt, op, size, out, 0, count)) return 1;

          for (j = 0; j < count; ++j) ref_store(dt, send, j, input(dt, rank, j));
          memset(recv, 0x5a, count * es);
          CHECK_OK(gang_reduce(g, send, in_place ? send : recv, count, dt, op, root, NULL));
          if (rank == root && check_reduced("reduce", dt, op, size, out, 0, count)) return 1;

          /* reduce_scatter: block r of the input is elements r*c.. of the
           * reference, so that every block differs. */
          {
            const size_t c = count / (size_t)size + (ci == 2);
            for (j = 0; j < c * (size_t)size; ++j) ref_store(dt, send, j, input(dt, rank, j));
            CHECK_OK(gang_reduce_scatter(g, send, in_place ? send + (size_t)rank * c * es : recv,
                                         c, dt, op, NULL));
            if (check_reduced("reduce_scatter", dt, op, size,
                              in_place ? send + (size_t)rank * c * es : recv,
                              (size_t)rank * c, c)) {
              return 1;
            }
          }
        }
      }
      /* all_gather and gather: rank r's block is block(r, .). */
      for (in_place = 0; in_place < 2; ++in_place) {
        uint8_t* mine = in_place ? recv + (size_t)rank * count * es : send;
        for (j = 0; j < count; ++j) ref_store(dt, mine, j, block(dt, rank, j));
        CHECK_OK(gang_all_gather(g, mine, recv, count, dt, NULL));
        for (r = 0; r < size; ++r) {
          for (j = 0; j < count; ++j) {
            CHECK(ref_load(dt, recv + (size_t)r * count * es, j) == block(dt, r, j),
                  "all_gather %s count %zu: block %d [%zu]", ref_dtype_name(dt), count, r, j);
          }
        }
        for (j = 0; j < count; ++j) ref_store(dt, send, j, block(dt, rank, j));
        memset(recv, 0x5a, count * es * (size_t)size);
        CHECK_OK(gang_gather(g, send, recv, count, dt, 0, NULL));
        for (r = 0; rank == 0 && r < size; ++r) {
          for (j = 0; j < count; ++j) {
            CHECK(ref_load(dt, recv + (size_t)r * count * es, j) == block(dt, r, j),
                  "gather %s count %zu: block %d [%zu]", ref_dtype_name(dt), count, r, j);
          }
        }
      }
      CHECK_OK(gang_barrier(g, NULL));
    }
  }
  return 0;
}

static void test_inline_exact(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_exact, NULL, 30000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_exact, NULL, 30000, WALL_S), 0);
}

/* ---- mismatches ------------------------------------------------------------- */

#define MISMATCH_LIMIT_MS 5000

/* Rank 1 calls another operation than the others; which one, by case. */
static gang_status_t call_case(gang_t* g, int differs, int which) {
  static float x[4000], y[4000];
  if (!differs) return gang_all_reduce(g, x, y, 4, GANG_FLOAT32, GANG_SUM, NULL);
  switch (which) {
    case 0: /* inline too, another count */
      return gang_all_reduce(g, x, y, 8, GANG_FLOAT32, GANG_SUM, NULL);
    case 1: /* through the slots */
      return gang_all_reduce(g, x, y, 300, GANG_FLOAT32, GANG_SUM, NULL);
    case 2: /* split */
      return gang_all_reduce(g, x, y, 4000, GANG_FLOAT32, GANG_SUM, NULL);
    case 3: /* inline, another kind */
      return gang_barrier(g, NULL);
    case 4: /* inline, another op */
      return gang_all_reduce(g, x, y, 4, GANG_FLOAT32, GANG_MAX, NULL);
    default: /* a broadcast that does not meet, rooted here */
      return gang_broadcast(g, x, 4, GANG_FLOAT32, 1, NULL);
  }
}

static int rank_mismatch(gang_t* g, int rank, int size, void* arg) {
  const int which = *(const int*)arg;
  int64_t t0, elapsed;
  gang_status_t st;
  (void)size;
  CHECK_OK(gang_barrier(g, NULL));
  t0 = gang_test_now_ms();
  st = call_case(g, rank == 1, which);
  elapsed = gang_test_now_ms() - t0;
  if (which == 5 && rank == 1 && st == GANG_OK) {
    /* The root of a broadcast that does not meet goes on; its next
     * operation that meets finds the others' disagreement. */
    st = gang_barrier(g, NULL);
    elapsed = gang_test_now_ms() - t0;
  }
  CHECK(st == GANG_ERR_MISMATCH, "case %d: rank %d got %s: %s", which, rank,
        gang_status_name(st), gang_last_error());
  CHECK(strstr(gang_last_error(), "different operations") != NULL, "case %d: message: %s",
        which, gang_last_error());
  CHECK(elapsed <= MISMATCH_LIMIT_MS, "case %d: the mismatch took %lld ms", which,
        (long long)elapsed);
  return 0;
}

static void test_inline_mismatch(void** s) {
  int which;
  (void)s;
  for (which = 0; which < 6; ++which) {
    assert_int_equal(gang_test_run_ranks(2, "shm", rank_mismatch, &which, 30000, WALL_S), 0);
    assert_int_equal(gang_test_run_ranks(3, "shm", rank_mismatch, &which, 30000, WALL_S), 0);
  }
}

/* ---- a rank that never comes --------------------------------------------------- */

#define TIMEOUT_MS 1500
#define SLACK_MS 3000
#define SLOT_DONE 3

static int rank_absent(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  const int absent = size - 1;
  int64_t x = 1, y = 0, t0, elapsed;
  char absent_name[32];
  gang_status_t st;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == absent) {
    if (gang_test_wait_shared(SLOT_DONE, size - 1, TIMEOUT_MS + 20000) != 0) {
      fprintf(stderr, "[rank %d] the others never finished\n", rank);
    }
    return 0;
  }
  t0 = gang_test_now_ms();
  st = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  elapsed = gang_test_now_ms() - t0;
  __atomic_add_fetch(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  CHECK(st == GANG_ERR_TIMEOUT, "got %s: %s", gang_status_name(st), gang_last_error());
  CHECK(elapsed >= TIMEOUT_MS - 100 && elapsed <= TIMEOUT_MS + SLACK_MS,
        "timed out after %lld ms; the timeout is %d ms", (long long)elapsed, TIMEOUT_MS);
  snprintf(absent_name, sizeof absent_name, "rank %d (", absent);
  CHECK(strstr(gang_last_error(), absent_name) != NULL, "message: %s", gang_last_error());
  /* The ranks that came are not named as missing. */
  CHECK(size < 3 || strstr(gang_last_error(), rank == 0 ? "rank 1 (" : "rank 0 (") == NULL,
        "message names a rank that came: %s", gang_last_error());
  return 0;
}

static void test_inline_absent_rank(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_absent, NULL, TIMEOUT_MS, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_absent, NULL, TIMEOUT_MS, WALL_S), 0);
}

/* ---- long mixed sequences --------------------------------------------------- */

static uint32_t val(int i, int r, size_t j) { return (uint32_t)(i * 7919u + r * 104729u + j); }

/* 3000 operations, the same on every rank: inline all-reduces and
 * all-gathers, all-reduces through the slots and split, broadcasts that do
 * not meet from changing roots (a root runs ahead), barriers; now and then
 * a rank is slow. Every value checked. */
static int rank_mixed(gang_t* g, int rank, int size, void* arg) {
  static const size_t kSizes[] = {1, 44, 45, 300, 1500};
  static uint32_t send[4 * 1500], recv[4 * 1500];
  int i, r;
  size_t j;
  (void)arg;
  for (i = 0; i < 3000; ++i) {
    const size_t n = kSizes[(size_t)(i * 31 + i / 7) % 5];
    if ((i * 13 + rank) % 97 == 0) usleep(200);
    switch (i % 5) {
      case 0:
      case 1:
        for (j = 0; j < n; ++j) send[j] = val(i, rank, j);
        CHECK_OK(gang_all_reduce(g, send, recv, n, GANG_UINT32, GANG_SUM, NULL));
        for (j = 0; j < n; ++j) {
          uint32_t want = 0;
          for (r = 0; r < size; ++r) want += val(i, r, j);
          CHECK(recv[j] == want, "op %d all_reduce count %zu [%zu] = %u, want %u", i, n, j,
                recv[j], want);
        }
        break;
      case 2: {
        const int root = (i / 5) % size;
        for (j = 0; j < n; ++j) recv[j] = rank == root ? val(i, root, j) : 0;
        CHECK_OK(gang_broadcast(g, recv, n, GANG_UINT32, root, NULL));
        for (j = 0; j < n; ++j) CHECK(recv[j] == val(i, root, j), "op %d broadcast [%zu]", i, j);
        break;
      }
      case 3:
        for (j = 0; j < n; ++j) send[j] = val(i, rank, j);
        CHECK_OK(gang_all_gather(g, send, recv, n, GANG_UINT32, NULL));
        for (r = 0; r < size; ++r) {
          for (j = 0; j < n; ++j) {
            CHECK(recv[(size_t)r * n + j] == val(i, r, j), "op %d all_gather %d [%zu]", i, r, j);
          }
        }
        break;
      default:
        if (i % 3 == 0) {
          CHECK_OK(gang_barrier(g, NULL));
        } else {
          const size_t c = n / 4 + 1;
          for (j = 0; j < c * (size_t)size; ++j) send[j] = val(i, rank, j);
          CHECK_OK(gang_reduce_scatter(g, send, recv, c, GANG_UINT32, GANG_MAX, NULL));
          for (j = 0; j < c; ++j) {
            uint32_t want = 0;
            for (r = 0; r < size; ++r) {
              const uint32_t v = val(i, r, (size_t)rank * c + j);
              if (v > want) want = v;
            }
            CHECK(recv[j] == want, "op %d reduce_scatter [%zu]", i, j);
          }
        }
    }
  }
  return 0;
}

static void test_inline_mixed(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_mixed, NULL, 30000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_mixed, NULL, 30000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(4, "shm", rank_mixed, NULL, 30000, WALL_S), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inline_exact),
      cmocka_unit_test(test_inline_mismatch),
      cmocka_unit_test(test_inline_absent_rank),
      cmocka_unit_test(test_inline_mixed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
