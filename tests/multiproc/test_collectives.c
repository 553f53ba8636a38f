/*
 * test_collectives.c - every collective over real Gloo gangs of 1 to 4
 * processes on loopback.
 *
 * One cmocka test per (collective, N). Inside each: every dtype, every op
 * (reducing collectives), in place and out of place, every rank as root
 * (rooted collectives), counts 7, 1 and 0 (with NULL pointers), and one
 * 16 MiB buffer. Results are compared bit for bit with the tests' own
 * reference model (tests/harness/reference.c), element 0 of every reduction
 * also with a closed form, and results every rank must share are hashed and
 * compared across the gang.
 *
 * Reduction inputs are chosen so the expected value is independent of the
 * reduction order, which the contract leaves to the backend:
 *  - integers: any values; SUM and PROD wrap, so the order cannot matter;
 *  - MIN/MAX: any values;
 *  - floats with N <= 2: any values (one rounding step, a+b == b+a), with
 *    fractional parts so that rounding to float16/bfloat16 matters;
 *  - floats with N >= 3: values whose partial sums and products are exact
 *    in bfloat16 (multiples of 1/8 below 32; products of {1,3}*2^k), so the
 *    only rounding left is AVG's division by N, which matters for N = 3.
 *
 * Pass a cmocka test filter (e.g. "test_all_reduce_n?") as argv[1] to run a
 * subset; CTest runs one collective per entry.
 */
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

#define BIG_BYTES ((size_t)16 << 20)
#define GUARD 16
#define SENTINEL 0xA5
#define GUARD_BYTE 0x5A

typedef struct ctx {
  gang_t* g;
  int rank;
  int size;
  long cases;
  uint64_t sym_hash; /* results that every rank must share */
} ctx_t;

static const size_t kCounts[] = {7, 1, 0};
#define NCOUNTS (sizeof kCounts / sizeof kCounts[0])

/* ---- helpers --------------------------------------------------------------- */

static void* xalloc(size_t bytes) {
  void* p = malloc(bytes + GUARD);
  if (p == NULL) {
    fprintf(stderr, "[rank %d] out of memory (%zu bytes)\n", gang_test_rank(),
            bytes);
    abort();
  }
  memset(p, SENTINEL, bytes);
  memset((char*)p + bytes, GUARD_BYTE, GUARD);
  return p;
}

static int guard_ok(const void* p, size_t bytes) {
  const unsigned char* g = (const unsigned char*)p + bytes;
  size_t i;
  for (i = 0; i < GUARD; ++i) {
    if (g[i] != GUARD_BYTE) return 0;
  }
  return 1;
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/* Data-movement payload: arbitrary bits (NaN patterns included for floats:
 * moving data must never touch them). */
static uint64_t mv_input(gang_dtype_t dt, int src, size_t idx, uint64_t salt) {
  const uint64_t h = mix64(((uint64_t)src << 48) ^ ((uint64_t)idx << 8) ^
                           (salt * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dt);
  return ref_from_int(dt, (int64_t)h);
}

/* Reduction input `idx` of rank r (see the file comment). Element 0 is
 * always r + 1, for the closed forms. */
static uint64_t red_input(gang_dtype_t dt, gang_op_t op, int n, int r,
                          size_t idx) {
  const size_t k = idx % 29;
  if (idx == 0) return ref_from_double(dt, r + 1.0);
  if (dt == GANG_BOOL) { /* mixed, so that "or" and "and" both vary */
    return (mix64((uint64_t)(k * 57 + (size_t)r * 3 + (size_t)op)) >> 7) & 1u;
  }
  if (!ref_dtype_is_float(dt)) {
    const int bits = (int)ref_dtype_size(dt) * 8;
    const int64_t big = (int64_t)((bits >= 64 ? ~0ull >> 1
                                              : (1ull << (bits - 1)) - 1ull) -
                                  k);
    switch (op) {
      case GANG_SUM:
        if (k % 3 == 0) return ref_from_int(dt, big - 3 * r);      /* wraps up */
        if (k % 3 == 1) return ref_from_int(dt, -big + r);         /* wraps down */
        return ref_from_int(dt, -(int64_t)(7 * r + (int)k));
      case GANG_PROD:
        if (k % 3 == 0) return ref_from_int(dt, r + 2 + (int)k);
        if (k % 3 == 1) return ref_from_int(dt, -(int64_t)(r + 1) * (int64_t)(k + 5));
        return ref_from_int(dt, (int64_t)mix64((uint64_t)(k * 131 + (size_t)r)));
      default:
        return ref_from_int(dt, (int64_t)mix64((uint64_t)(k * 977 + (size_t)r * 7)));
    }
  }
  if (op == GANG_MIN || op == GANG_MAX) {
    const int64_t m = (int64_t)(mix64((uint64_t)(k * 31 + (size_t)r * 1009)) % 2001) - 1000;
    return ref_from_double(dt, (double)m * 0.0173);
  }
  if (n <= 2) {
    /* One rounding step at most: fractional values, rounding matters. */
    const double sign = (k % 4 == 3) ? -1.0 : 1.0;
    if (op == GANG_PROD) return ref_from_double(dt, sign * (0.9 + (r + 1) * 0.77 + k * 0.13));
    return ref_from_double(dt, sign * (0.5 + (r + 1) * 1.1 + k * 0.37));
  }
  if (op == GANG_PROD) {
    static const double table[8] = {1.5, 0.75, 2.0, 0.5, 3.0, -1.5, 1.0, -0.5};
    return ref_from_double(dt, table[(k + (size_t)r) % 8]);
  }
  {
    const double sign = (k % 4 == 3) ? -1.0 : 1.0;
    return ref_from_double(dt, sign * ((r + 1) + 0.125 * (double)((k + 3 * (size_t)r) % 8)));
  }
}

/* The expected reduction of element idx over all ranks. */
static uint64_t red_expect(gang_dtype_t dt, gang_op_t op, int n, size_t idx) {
  uint64_t acc = red_input(dt, op, n, 0, idx);
  int r;
  for (r = 1; r < n; ++r) acc = ref_reduce(dt, op, acc, red_input(dt, op, n, r, idx));
  return ref_finish(dt, op, acc, n);
}

/* Closed forms for element 0 (inputs rank+1). */
static uint64_t closed_form(gang_dtype_t dt, gang_op_t op, int n) {
  int64_t fact = 1;
  int i;
  for (i = 2; i <= n; ++i) fact *= i;
  switch (op) {
    case GANG_SUM: return ref_from_double(dt, n * (n + 1) / 2);
    case GANG_PROD: return ref_from_double(dt, (double)fact);
    case GANG_MIN: return ref_from_double(dt, 1);
    case GANG_MAX: return ref_from_double(dt, n);
    default: /* AVG, of floating types only */
      return ref_from_double(dt, (n + 1) / 2.0);
  }
}

static void describe(char* buf, size_t len, const char* coll, gang_dtype_t dt,
                     int op, size_t count, int in_place, int root) {
  int k = snprintf(buf, len, "%s %s", coll, ref_dtype_name(dt));
  if (op >= 0) k += snprintf(buf + k, len - (size_t)k, " %s", ref_op_name((gang_op_t)op));
  k += snprintf(buf + k, len - (size_t)k, " count=%zu %s", count,
                in_place ? "in-place" : "out-of-place");
  if (root >= 0) snprintf(buf + k, len - (size_t)k, " root=%d", root);
}

/* Every rank checks that every rank's sym_hash equals its own. */
/* AVG of bool or an integer: gang_supports says no, and every reducing
 * collective fails locally with GANG_ERR_UNSUPPORTED saying what to use
 * instead (GANG_SUM), leaving the gang usable. Returns GANG_OK when so. */
static gang_status_t unreducible(ctx_t* c, gang_dtype_t dt, gang_op_t op) {
  uint64_t x[8] = {1, 0, 1, 0}; /* 4 elements of any dtype, or 1 per rank */
  uint64_t y[8] = {0};
  size_t counts[4] = {1, 1, 1, 1};
  gang_status_t s[4];
  int i;
  if (gang_supports(c->g, op, dt)) return GANG_ERR_INTERNAL;
  s[0] = gang_all_reduce(c->g, x, y, 4, dt, op, NULL);
  s[1] = gang_reduce(c->g, x, y, 4, dt, op, 0, NULL);
  s[2] = gang_reduce_scatter(c->g, x, y, 1, dt, op, NULL);
  s[3] = gang_reduce_scatterv(c->g, x, y, counts, (size_t)c->size, dt, op,
                              NULL);
  for (i = 0; i < 4; ++i) {
    if (s[i] != GANG_ERR_UNSUPPORTED) return GANG_ERR_INTERNAL;
  }
  if (strstr(gang_last_error(), "GANG_SUM") == NULL) return GANG_ERR_INTERNAL;
  c->cases++;
  return GANG_OK;
}

static int check_hashes(ctx_t* c) {
  uint64_t* all = (uint64_t*)xalloc(sizeof(uint64_t) * (size_t)c->size);
  int r;
  CHECK_OK(gang_all_gather(c->g, &c->sym_hash, all, 1, GANG_UINT64, NULL));
  for (r = 0; r < c->size; ++r) {
    CHECK(all[r] == c->sym_hash,
          "rank %d's results differ from this rank's (hash %llx vs %llx)", r,
          (unsigned long long)all[r], (unsigned long long)c->sym_hash);
  }
  free(all);
  return 0;
}

static size_t vcount(size_t count, int r) {
  return count == 0 ? 0 : (count + 2 * (size_t)r) % (count + 2);
}

/* ---- reductions ------------------------------------------------------------- */

static int check_reduction(const char* what, gang_dtype_t dt, gang_op_t op,
                           int n, const void* got, size_t chunk_start,
                           size_t count) {
  size_t j;
  for (j = 0; j < count; ++j) {
    const uint64_t a = ref_load(dt, got, j);
    const uint64_t b = red_expect(dt, op, n, chunk_start + j);
    if (a != b) {
      char ga[64], wb[64];
      gang_test_report(__FILE__, __LINE__, "result == reference",
                       "%s: element %zu is %s, expected %s", what,
                       chunk_start + j, ref_format(dt, a, ga, sizeof ga),
                       ref_format(dt, b, wb, sizeof wb));
      return 1;
    }
    if (chunk_start + j == 0 && b != closed_form(dt, op, n)) {
      char wb[64], cf[64];
      gang_test_report(__FILE__, __LINE__, "reference == closed form",
                       "%s: the reference %s disagrees with the closed form %s",
                       what, ref_format(dt, b, wb, sizeof wb),
                       ref_format(dt, closed_form(dt, op, n), cf, sizeof cf));
      return 1;
    }
  }
  return 0;
}

static void fill_red(void* buf, gang_dtype_t dt, gang_op_t op, int n, int r,
                     size_t start, size_t count) {
  size_t j;
  for (j = 0; j < count; ++j) ref_store(dt, buf, j, red_input(dt, op, n, r, start + j));
}

/* Floating inputs whose reduction depends on the order: the result is not
 * predictable to the bit, but it must be close to the exact value and
 * bitwise the same on every rank (compared through sym_hash), for small
 * messages and for large ones, which backends reduce differently. */
static int all_reduce_consistency(ctx_t* c) {
  static const gang_dtype_t dts[4] = {GANG_FLOAT16, GANG_BFLOAT16, GANG_FLOAT32, GANG_FLOAT64};
  static const double tol[4] = {1e-2, 5e-2, 1e-5, 1e-12};
  static const gang_op_t ops[3] = {GANG_SUM, GANG_PROD, GANG_AVG};
  static const size_t counts[3] = {7, 5000, 100000};
  int d, o, r;
  size_t ci, i;
  for (d = 0; d < 4; ++d) {
    const gang_dtype_t dt = dts[d];
    const size_t es = ref_dtype_size(dt);
    for (o = 0; o < 3; ++o) {
      const gang_op_t op = ops[o];
      for (ci = 0; ci < 3; ++ci) {
        const size_t count = counts[ci];
        void* send = xalloc(count * es);
        void* recv = xalloc(count * es);
        char what[128];
        snprintf(what, sizeof what, "all_reduce consistency %s %s count=%zu",
                 ref_dtype_name(dt), ref_op_name(op), count);
        for (i = 0; i < count; ++i) {
          const double u = (double)(mix64((uint64_t)c->rank * 1000003u + i) >> 11) / 9007199254740992.0;
          ref_store(dt, send, i, ref_from_double(dt, 0.5 + 1.5 * u));
        }
        CHECK_OK(gang_all_reduce(c->g, send, recv, count, dt, op, NULL));
        /* Close to the exact value of the (rounded) inputs. */
        for (i = 0; i < count; i += 1 + count / 1000) {
          double exact = op == GANG_PROD ? 1.0 : 0.0, mag = 0.0, got, err;
          for (r = 0; r < c->size; ++r) {
            const double u = (double)(mix64((uint64_t)r * 1000003u + i) >> 11) / 9007199254740992.0;
            const double x = ref_to_double(dt, ref_from_double(dt, 0.5 + 1.5 * u));
            if (op == GANG_PROD) exact *= x; else exact += x;
            mag += x;
          }
          if (op == GANG_AVG) {
            exact /= c->size;
            mag /= c->size;
          }
          if (op == GANG_PROD) mag = exact * c->size;
          got = ref_to_double(dt, ref_load(dt, recv, i));
          err = got > exact ? got - exact : exact - got;
          CHECK(err <= tol[d] * mag, "%s: element %zu is %.9g, exact %.9g", what, i, got, exact);
        }
        c->sym_hash = ref_hash(c->sym_hash, recv, count * es);
        free(send);
        free(recv);
        c->cases++;
      }
    }
  }
  return 0;
}

static int test_all_reduce(ctx_t* c) {
  char what[160];
  int d, o, place;
  size_t ci;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (o = 0; o < REF_NUM_OPS; ++o) {
      const gang_op_t op = ref_ops[o];
      if (!ref_reducible(dt, op)) {
        CHECK_OK(unreducible(c, dt, op));
        continue;
      }
      for (ci = 0; ci < NCOUNTS; ++ci) {
        const size_t count = kCounts[ci];
        for (place = 0; place < 2; ++place) {
          void* send;
          void* recv;
          describe(what, sizeof what, "all_reduce", dt, op, count, place, -1);
          if (count == 0) {
            CHECK_OK(gang_all_reduce(c->g, NULL, NULL, 0, dt, op, NULL));
            c->cases++;
            continue;
          }
          send = xalloc(count * es);
          fill_red(send, dt, op, c->size, c->rank, 0, count);
          recv = place ? send : xalloc(count * es);
          CHECK_OK(gang_all_reduce(c->g, send, recv, count, dt, op, NULL));
          if (check_reduction(what, dt, op, c->size, recv, 0, count)) return 1;
          CHECK(guard_ok(recv, count * es), "%s: wrote past recv", what);
          c->sym_hash = ref_hash(c->sym_hash, recv, count * es);
          if (!place) {
            void* orig = xalloc(count * es);
            fill_red(orig, dt, op, c->size, c->rank, 0, count);
            CHECK(memcmp(orig, send, count * es) == 0, "%s: send was modified", what);
            free(orig);
            free(recv);
          }
          free(send);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB of float32 SUM */
    const size_t count = BIG_BYTES / sizeof(float);
    float* send = (float*)xalloc(BIG_BYTES);
    float* recv = (float*)xalloc(BIG_BYTES);
    const float base = (float)(c->size * (c->size - 1) / 2);
    size_t i;
    for (i = 0; i < count; ++i) send[i] = (float)((i & 1023) + (size_t)c->rank);
    CHECK_OK(gang_all_reduce(c->g, send, recv, count, GANG_FLOAT32, GANG_SUM, NULL));
    for (i = 0; i < count; ++i) {
      const float want = (float)(i & 1023) * (float)c->size + base;
      CHECK(recv[i] == want, "all_reduce 16 MiB: element %zu is %g, expected %g",
            i, (double)recv[i], (double)want);
    }
    c->sym_hash = ref_hash(c->sym_hash, recv, BIG_BYTES);
    free(send);
    free(recv);
    c->cases++;
  }
  if (all_reduce_consistency(c)) return 1;
  return check_hashes(c);
}

static int test_reduce(ctx_t* c) {
  char what[160];
  int d, o, place, root;
  size_t ci;
  for (root = 0; root < c->size; ++root) {
    const int at_root = root == c->rank;
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      const size_t es = ref_dtype_size(dt);
      for (o = 0; o < REF_NUM_OPS; ++o) {
        const gang_op_t op = ref_ops[o];
        if (!ref_reducible(dt, op)) {
          CHECK_OK(unreducible(c, dt, op));
          continue;
        }
        for (ci = 0; ci < NCOUNTS; ++ci) {
          const size_t count = kCounts[ci];
          for (place = 0; place < 2; ++place) {
            void* send;
            void* recv;
            describe(what, sizeof what, "reduce", dt, op, count, place, root);
            if (count == 0) {
              CHECK_OK(gang_reduce(c->g, NULL, NULL, 0, dt, op, root, NULL));
              c->cases++;
              continue;
            }
            send = xalloc(count * es);
            fill_red(send, dt, op, c->size, c->rank, 0, count);
            if (place) {
              recv = send;
            } else if (at_root || count % 2 == 0) {
              recv = xalloc(count * es); /* off root: scratch it may clobber */
            } else {
              recv = NULL; /* off root recv may be NULL */
            }
            CHECK_OK(gang_reduce(c->g, send, recv, count, dt, op, root, NULL));
            if (at_root) {
              if (check_reduction(what, dt, op, c->size, recv, 0, count)) return 1;
              CHECK(guard_ok(recv, count * es), "%s: wrote past recv", what);
            }
            if (!place) {
              void* orig = xalloc(count * es);
              fill_red(orig, dt, op, c->size, c->rank, 0, count);
              CHECK(memcmp(orig, send, count * es) == 0, "%s: send was modified", what);
              free(orig);
              free(recv);
            }
            free(send);
            c->cases++;
          }
        }
      }
    }
  }
  { /* 16 MiB of float32 SUM at the last rank */
    const size_t count = BIG_BYTES / sizeof(float);
    const int root = c->size - 1;
    float* send = (float*)xalloc(BIG_BYTES);
    float* recv = c->rank == root ? (float*)xalloc(BIG_BYTES) : NULL;
    size_t i;
    for (i = 0; i < count; ++i) send[i] = (float)((i & 511) * (size_t)(c->rank + 1));
    CHECK_OK(gang_reduce(c->g, send, recv, count, GANG_FLOAT32, GANG_SUM, root, NULL));
    if (recv != NULL) {
      const float tri = (float)(c->size * (c->size + 1) / 2);
      for (i = 0; i < count; ++i) {
        const float want = (float)(i & 511) * tri;
        CHECK(recv[i] == want, "reduce 16 MiB: element %zu is %g, expected %g", i,
              (double)recv[i], (double)want);
      }
    }
    free(send);
    free(recv);
    c->cases++;
  }
  return 0;
}

static int test_reduce_scatter(ctx_t* c) {
  char what[160];
  int d, o, place;
  size_t ci;
  const size_t p = (size_t)c->size;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (o = 0; o < REF_NUM_OPS; ++o) {
      const gang_op_t op = ref_ops[o];
      if (!ref_reducible(dt, op)) {
        CHECK_OK(unreducible(c, dt, op));
        continue;
      }
      for (ci = 0; ci < NCOUNTS; ++ci) {
        const size_t count = kCounts[ci];
        const size_t mine = (size_t)c->rank * count;
        for (place = 0; place < 2; ++place) {
          unsigned char* send;
          void* recv;
          describe(what, sizeof what, "reduce_scatter", dt, op, count, place, -1);
          if (count == 0) {
            CHECK_OK(gang_reduce_scatter(c->g, NULL, NULL, 0, dt, op, NULL));
            c->cases++;
            continue;
          }
          send = (unsigned char*)xalloc(p * count * es);
          fill_red(send, dt, op, c->size, c->rank, 0, p * count);
          recv = place ? (void*)(send + mine * es) : xalloc(count * es);
          CHECK_OK(gang_reduce_scatter(c->g, send, recv, count, dt, op, NULL));
          /* Element j of chunk r has index r*count + j in every rank's send. */
          if (check_reduction(what, dt, op, c->size, recv, mine, count)) return 1;
          if (!place) {
            void* orig = xalloc(p * count * es);
            fill_red(orig, dt, op, c->size, c->rank, 0, p * count);
            CHECK(memcmp(orig, send, p * count * es) == 0, "%s: send was modified", what);
            CHECK(guard_ok(recv, count * es), "%s: wrote past recv", what);
            free(orig);
            free(recv);
          }
          free(send);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB of float32 SUM */
    const size_t count = BIG_BYTES / sizeof(float) / p;
    float* send = (float*)xalloc(BIG_BYTES);
    float* recv = (float*)xalloc(count * sizeof(float));
    size_t i;
    for (i = 0; i < count * p; ++i) send[i] = (float)((i % 1000) + (size_t)c->rank);
    CHECK_OK(gang_reduce_scatter(c->g, send, recv, count, GANG_FLOAT32, GANG_SUM, NULL));
    for (i = 0; i < count; ++i) {
      const size_t idx = (size_t)c->rank * count + i;
      const float want = (float)(idx % 1000) * (float)c->size +
                         (float)(c->size * (c->size - 1) / 2);
      CHECK(recv[i] == want, "reduce_scatter 16 MiB: element %zu is %g, expected %g",
            i, (double)recv[i], (double)want);
    }
    free(send);
    free(recv);
    c->cases++;
  }
  return 0;
}

static int test_reduce_scatterv(ctx_t* c) {
  char what[160];
  int d, o, place, r;
  size_t ci;
  const size_t p = (size_t)c->size;
  size_t* counts = (size_t*)xalloc(p * sizeof(size_t));
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (o = 0; o < REF_NUM_OPS; ++o) {
      const gang_op_t op = ref_ops[o];
      if (!ref_reducible(dt, op)) {
        CHECK_OK(unreducible(c, dt, op));
        continue;
      }
      for (ci = 0; ci < NCOUNTS; ++ci) {
        size_t total = 0, off = 0, mine;
        for (r = 0; r < c->size; ++r) {
          counts[r] = vcount(kCounts[ci], r);
          if (r < c->rank) off += counts[r];
          total += counts[r];
        }
        mine = counts[c->rank];
        for (place = 0; place < 2; ++place) {
          unsigned char* send;
          void* recv;
          describe(what, sizeof what, "reduce_scatterv", dt, op, kCounts[ci], place, -1);
          if (total == 0) {
            CHECK_OK(gang_reduce_scatterv(c->g, NULL, NULL, counts, p, dt, op, NULL));
            c->cases++;
            continue;
          }
          send = (unsigned char*)xalloc(total * es);
          fill_red(send, dt, op, c->size, c->rank, 0, total);
          if (place) {
            recv = send + off * es;
          } else {
            recv = mine == 0 ? NULL : xalloc(mine * es);
          }
          CHECK_OK(gang_reduce_scatterv(c->g, send, recv, counts, p, dt, op, NULL));
          if (check_reduction(what, dt, op, c->size, recv, off, mine)) return 1;
          if (!place && recv != NULL) {
            CHECK(guard_ok(recv, mine * es), "%s: wrote past recv", what);
            free(recv);
          }
          free(send);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB of float32 SUM, uneven chunks */
    const size_t base = BIG_BYTES / sizeof(float) / p;
    size_t total = 0, off = 0, i;
    float* send;
    float* recv;
    for (r = 0; r < c->size; ++r) {
      counts[r] = base - (size_t)r * 1000;
      if (r < c->rank) off += counts[r];
      total += counts[r];
    }
    send = (float*)xalloc(total * sizeof(float));
    recv = (float*)xalloc(counts[c->rank] * sizeof(float));
    for (i = 0; i < total; ++i) send[i] = (float)((i % 777) + (size_t)c->rank);
    CHECK_OK(gang_reduce_scatterv(c->g, send, recv, counts, p, GANG_FLOAT32, GANG_SUM, NULL));
    for (i = 0; i < counts[c->rank]; ++i) {
      const float want = (float)((off + i) % 777) * (float)c->size +
                         (float)(c->size * (c->size - 1) / 2);
      CHECK(recv[i] == want, "reduce_scatterv 16 MiB: element %zu is %g, expected %g",
            i, (double)recv[i], (double)want);
    }
    free(send);
    free(recv);
    c->cases++;
  }
  free(counts);
  return 0;
}

/* ---- data movement ---------------------------------------------------------- */

static void fill_mv(void* buf, gang_dtype_t dt, int src, size_t start,
                    size_t count, uint64_t salt) {
  size_t j;
  for (j = 0; j < count; ++j) ref_store(dt, buf, j, mv_input(dt, src, start + j, salt));
}

static int check_mv(const char* what, gang_dtype_t dt, const void* got,
                    int src, size_t start, size_t count, uint64_t salt) {
  size_t j;
  for (j = 0; j < count; ++j) {
    const uint64_t a = ref_load(dt, got, j);
    const uint64_t b = mv_input(dt, src, start + j, salt);
    if (a != b) {
      gang_test_report(__FILE__, __LINE__, "result == sent data",
                       "%s: element %zu (from rank %d) is 0x%llx, expected 0x%llx",
                       what, j, src, (unsigned long long)a, (unsigned long long)b);
      return 1;
    }
  }
  return 0;
}

static int test_broadcast(ctx_t* c) {
  char what[160];
  int d, root;
  size_t ci;
  for (root = 0; root < c->size; ++root) {
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      const size_t es = ref_dtype_size(dt);
      for (ci = 0; ci < NCOUNTS; ++ci) {
        const size_t count = kCounts[ci];
        void* buf;
        describe(what, sizeof what, "broadcast", dt, -1, count, 1, root);
        if (count == 0) {
          CHECK_OK(gang_broadcast(c->g, NULL, 0, dt, root, NULL));
          c->cases++;
          continue;
        }
        buf = xalloc(count * es);
        if (c->rank == root) fill_mv(buf, dt, root, 0, count, 1);
        CHECK_OK(gang_broadcast(c->g, buf, count, dt, root, NULL));
        if (check_mv(what, dt, buf, root, 0, count, 1)) return 1;
        CHECK(guard_ok(buf, count * es), "%s: wrote past buf", what);
        c->sym_hash = ref_hash(c->sym_hash, buf, count * es);
        free(buf);
        c->cases++;
      }
    }
  }
  { /* 16 MiB of bytes from the last rank */
    const int root = c->size - 1;
    unsigned char* buf = (unsigned char*)xalloc(BIG_BYTES);
    if (c->rank == root) fill_mv(buf, GANG_UINT8, root, 0, BIG_BYTES, 2);
    CHECK_OK(gang_broadcast(c->g, buf, BIG_BYTES, GANG_UINT8, root, NULL));
    if (check_mv("broadcast 16 MiB", GANG_UINT8, buf, root, 0, BIG_BYTES, 2)) return 1;
    c->sym_hash = ref_hash(c->sym_hash, buf, BIG_BYTES);
    free(buf);
    c->cases++;
  }
  return check_hashes(c);
}

static int test_all_gather(ctx_t* c) {
  char what[160];
  int d, place, r;
  size_t ci;
  const size_t p = (size_t)c->size;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (ci = 0; ci < NCOUNTS; ++ci) {
      const size_t count = kCounts[ci];
      for (place = 0; place < 2; ++place) {
        unsigned char* recv;
        void* send;
        describe(what, sizeof what, "all_gather", dt, -1, count, place, -1);
        if (count == 0) {
          CHECK_OK(gang_all_gather(c->g, NULL, NULL, 0, dt, NULL));
          c->cases++;
          continue;
        }
        recv = (unsigned char*)xalloc(p * count * es);
        if (place) {
          send = recv + (size_t)c->rank * count * es;
        } else {
          send = xalloc(count * es);
        }
        fill_mv(send, dt, c->rank, 0, count, 3);
        CHECK_OK(gang_all_gather(c->g, send, recv, count, dt, NULL));
        for (r = 0; r < c->size; ++r) {
          if (check_mv(what, dt, recv + (size_t)r * count * es, r, 0, count, 3)) return 1;
        }
        CHECK(guard_ok(recv, p * count * es), "%s: wrote past recv", what);
        c->sym_hash = ref_hash(c->sym_hash, recv, p * count * es);
        if (!place) {
          if (check_mv(what, dt, send, c->rank, 0, count, 3)) return 1;
          free(send);
        }
        free(recv);
        c->cases++;
      }
    }
  }
  { /* 16 MiB of bytes gathered */
    const size_t count = BIG_BYTES / p;
    unsigned char* send = (unsigned char*)xalloc(count);
    unsigned char* recv = (unsigned char*)xalloc(count * p);
    fill_mv(send, GANG_UINT8, c->rank, 0, count, 4);
    CHECK_OK(gang_all_gather(c->g, send, recv, count, GANG_UINT8, NULL));
    for (r = 0; r < c->size; ++r) {
      if (check_mv("all_gather 16 MiB", GANG_UINT8, recv + (size_t)r * count, r, 0, count, 4)) return 1;
    }
    c->sym_hash = ref_hash(c->sym_hash, recv, count * p);
    free(send);
    free(recv);
    c->cases++;
  }
  return check_hashes(c);
}

static int test_all_gatherv(ctx_t* c) {
  char what[160];
  int d, place, r;
  size_t ci;
  const size_t p = (size_t)c->size;
  size_t* counts = (size_t*)xalloc(p * sizeof(size_t));
  size_t* offs = (size_t*)xalloc(p * sizeof(size_t));
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (ci = 0; ci < NCOUNTS; ++ci) {
      size_t total = 0, mine;
      for (r = 0; r < c->size; ++r) {
        counts[r] = vcount(kCounts[ci], r);
        offs[r] = total;
        total += counts[r];
      }
      mine = counts[c->rank];
      for (place = 0; place < 2; ++place) {
        unsigned char* recv;
        void* send;
        describe(what, sizeof what, "all_gatherv", dt, -1, kCounts[ci], place, -1);
        if (total == 0) {
          CHECK_OK(gang_all_gatherv(c->g, NULL, 0, NULL, counts, p, dt, NULL));
          c->cases++;
          continue;
        }
        recv = (unsigned char*)xalloc(total * es);
        if (place) {
          send = recv + offs[c->rank] * es;
        } else {
          send = mine == 0 ? NULL : xalloc(mine * es);
        }
        if (send != NULL) fill_mv(send, dt, c->rank, 0, mine, 5);
        CHECK_OK(gang_all_gatherv(c->g, send, mine, recv, counts, p, dt, NULL));
        for (r = 0; r < c->size; ++r) {
          if (check_mv(what, dt, recv + offs[r] * es, r, 0, counts[r], 5)) return 1;
        }
        CHECK(guard_ok(recv, total * es), "%s: wrote past recv", what);
        c->sym_hash = ref_hash(c->sym_hash, recv, total * es);
        if (!place) free(send);
        free(recv);
        c->cases++;
      }
    }
  }
  { /* 16 MiB of bytes, uneven */
    size_t total = 0;
    unsigned char* send;
    unsigned char* recv;
    for (r = 0; r < c->size; ++r) {
      counts[r] = BIG_BYTES / p - (size_t)r * 4097;
      offs[r] = total;
      total += counts[r];
    }
    send = (unsigned char*)xalloc(counts[c->rank]);
    recv = (unsigned char*)xalloc(total);
    fill_mv(send, GANG_UINT8, c->rank, 0, counts[c->rank], 6);
    CHECK_OK(gang_all_gatherv(c->g, send, counts[c->rank], recv, counts, p, GANG_UINT8, NULL));
    for (r = 0; r < c->size; ++r) {
      if (check_mv("all_gatherv 16 MiB", GANG_UINT8, recv + offs[r], r, 0, counts[r], 6)) return 1;
    }
    c->sym_hash = ref_hash(c->sym_hash, recv, total);
    free(send);
    free(recv);
    c->cases++;
  }
  free(counts);
  free(offs);
  return check_hashes(c);
}

static int test_gather(ctx_t* c) {
  char what[160];
  int d, place, r, root;
  size_t ci;
  const size_t p = (size_t)c->size;
  for (root = 0; root < c->size; ++root) {
    const int at_root = root == c->rank;
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      const size_t es = ref_dtype_size(dt);
      for (ci = 0; ci < NCOUNTS; ++ci) {
        const size_t count = kCounts[ci];
        for (place = 0; place < 2; ++place) {
          unsigned char* recv = NULL;
          void* send;
          describe(what, sizeof what, "gather", dt, -1, count, place, root);
          if (count == 0) {
            CHECK_OK(gang_gather(c->g, NULL, NULL, 0, dt, root, NULL));
            c->cases++;
            continue;
          }
          if (at_root) recv = (unsigned char*)xalloc(p * count * es);
          if (place && at_root) {
            send = recv + (size_t)root * count * es;
          } else {
            send = xalloc(count * es);
          }
          fill_mv(send, dt, c->rank, 0, count, 7);
          CHECK_OK(gang_gather(c->g, send, recv, count, dt, root, NULL));
          if (at_root) {
            for (r = 0; r < c->size; ++r) {
              if (check_mv(what, dt, recv + (size_t)r * count * es, r, 0, count, 7)) return 1;
            }
            CHECK(guard_ok(recv, p * count * es), "%s: wrote past recv", what);
          }
          if (!(place && at_root)) {
            if (check_mv(what, dt, send, c->rank, 0, count, 7)) return 1;
            free(send);
          }
          free(recv);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB gathered at the last rank */
    const int root = c->size - 1;
    const size_t count = BIG_BYTES / p;
    unsigned char* send = (unsigned char*)xalloc(count);
    unsigned char* recv = c->rank == root ? (unsigned char*)xalloc(BIG_BYTES) : NULL;
    fill_mv(send, GANG_UINT8, c->rank, 0, count, 8);
    CHECK_OK(gang_gather(c->g, send, recv, count, GANG_UINT8, root, NULL));
    if (recv != NULL) {
      for (r = 0; r < c->size; ++r) {
        if (check_mv("gather 16 MiB", GANG_UINT8, recv + (size_t)r * count, r, 0, count, 8)) return 1;
      }
    }
    free(send);
    free(recv);
    c->cases++;
  }
  return 0;
}

static int test_scatter(ctx_t* c) {
  char what[160];
  int d, place, root;
  size_t ci;
  const size_t p = (size_t)c->size;
  for (root = 0; root < c->size; ++root) {
    const int at_root = root == c->rank;
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      const size_t es = ref_dtype_size(dt);
      for (ci = 0; ci < NCOUNTS; ++ci) {
        const size_t count = kCounts[ci];
        for (place = 0; place < 2; ++place) {
          unsigned char* send = NULL;
          void* recv;
          describe(what, sizeof what, "scatter", dt, -1, count, place, root);
          if (count == 0) {
            CHECK_OK(gang_scatter(c->g, NULL, NULL, 0, dt, root, NULL));
            c->cases++;
            continue;
          }
          if (at_root) {
            send = (unsigned char*)xalloc(p * count * es);
            fill_mv(send, dt, root, 0, p * count, 9);
          }
          if (place && at_root) {
            recv = send + (size_t)root * count * es;
          } else {
            recv = xalloc(count * es);
          }
          CHECK_OK(gang_scatter(c->g, send, recv, count, dt, root, NULL));
          if (check_mv(what, dt, recv, root, (size_t)c->rank * count, count, 9)) return 1;
          if (!(place && at_root)) {
            CHECK(guard_ok(recv, count * es), "%s: wrote past recv", what);
            free(recv);
          }
          if (at_root && check_mv(what, dt, send, root, 0, p * count, 9)) return 1;
          free(send);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB scattered from the last rank */
    const int root = c->size - 1;
    const size_t count = BIG_BYTES / p;
    unsigned char* send = NULL;
    unsigned char* recv = (unsigned char*)xalloc(count);
    if (c->rank == root) {
      send = (unsigned char*)xalloc(count * p);
      fill_mv(send, GANG_UINT8, root, 0, count * p, 10);
    }
    CHECK_OK(gang_scatter(c->g, send, recv, count, GANG_UINT8, root, NULL));
    if (check_mv("scatter 16 MiB", GANG_UINT8, recv, root, (size_t)c->rank * count, count, 10)) return 1;
    free(send);
    free(recv);
    c->cases++;
  }
  return 0;
}

/* all_to_all: element j of the chunk rank `src` sends to rank `dst`. */
static uint64_t a2a_value(gang_dtype_t dt, int src, int dst, size_t j,
                          uint64_t salt) {
  return mv_input(dt, src, (size_t)dst * 100003u + j, salt);
}

static int test_all_to_all(ctx_t* c) {
  char what[160];
  int d, r;
  size_t ci, j;
  const size_t p = (size_t)c->size;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (ci = 0; ci < NCOUNTS; ++ci) {
      const size_t count = kCounts[ci];
      unsigned char* send;
      unsigned char* recv;
      describe(what, sizeof what, "all_to_all", dt, -1, count, 0, -1);
      if (count == 0) {
        CHECK_OK(gang_all_to_all(c->g, NULL, NULL, 0, dt, NULL));
        c->cases++;
        continue;
      }
      send = (unsigned char*)xalloc(p * count * es);
      recv = (unsigned char*)xalloc(p * count * es);
      for (r = 0; r < c->size; ++r) {
        for (j = 0; j < count; ++j) {
          ref_store(dt, send, (size_t)r * count + j, a2a_value(dt, c->rank, r, j, 11));
        }
      }
      CHECK_OK(gang_all_to_all(c->g, send, recv, count, dt, NULL));
      for (r = 0; r < c->size; ++r) {
        for (j = 0; j < count; ++j) {
          const uint64_t got = ref_load(dt, recv, (size_t)r * count + j);
          const uint64_t want = a2a_value(dt, r, c->rank, j, 11);
          CHECK(got == want, "%s: element %zu of chunk %d is 0x%llx, expected 0x%llx",
                what, j, r, (unsigned long long)got, (unsigned long long)want);
        }
      }
      CHECK(guard_ok(recv, p * count * es), "%s: wrote past recv", what);
      free(send);
      free(recv);
      c->cases++;
    }
  }
  { /* 16 MiB of bytes */
    const size_t count = BIG_BYTES / p;
    unsigned char* send = (unsigned char*)xalloc(BIG_BYTES);
    unsigned char* recv = (unsigned char*)xalloc(BIG_BYTES);
    for (r = 0; r < c->size; ++r) {
      fill_mv(send + (size_t)r * count, GANG_UINT8, c->rank * 64 + r, 0, count, 12);
    }
    CHECK_OK(gang_all_to_all(c->g, send, recv, count, GANG_UINT8, NULL));
    for (r = 0; r < c->size; ++r) {
      if (check_mv("all_to_all 16 MiB", GANG_UINT8, recv + (size_t)r * count,
                   r * 64 + c->rank, 0, count, 12)) return 1;
    }
    free(send);
    free(recv);
    c->cases++;
  }
  return 0;
}

/* all_to_allv: how many elements rank a sends rank b. */
static size_t a2av_count(size_t count, int a, int b) {
  return count == 0 ? 0 : (count + (size_t)a + 2 * (size_t)b) % (count + 2);
}

static int test_all_to_allv(ctx_t* c) {
  char what[160];
  int d, r;
  size_t ci, j;
  const size_t p = (size_t)c->size;
  size_t* sc = (size_t*)xalloc(p * sizeof(size_t));
  size_t* rc = (size_t*)xalloc(p * sizeof(size_t));
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (ci = 0; ci < NCOUNTS; ++ci) {
      size_t stotal = 0, rtotal = 0, off;
      unsigned char* send;
      unsigned char* recv;
      for (r = 0; r < c->size; ++r) {
        sc[r] = a2av_count(kCounts[ci], c->rank, r);
        rc[r] = a2av_count(kCounts[ci], r, c->rank);
        stotal += sc[r];
        rtotal += rc[r];
      }
      describe(what, sizeof what, "all_to_allv", dt, -1, kCounts[ci], 0, -1);
      send = stotal ? (unsigned char*)xalloc(stotal * es) : NULL;
      recv = rtotal ? (unsigned char*)xalloc(rtotal * es) : NULL;
      for (r = 0, off = 0; r < c->size; ++r) {
        for (j = 0; j < sc[r]; ++j) {
          ref_store(dt, send, off + j, a2a_value(dt, c->rank, r, j, 13));
        }
        off += sc[r];
      }
      CHECK_OK(gang_all_to_allv(c->g, send, sc, p, recv, rc, p, dt, NULL));
      for (r = 0, off = 0; r < c->size; ++r) {
        for (j = 0; j < rc[r]; ++j) {
          const uint64_t got = ref_load(dt, recv, off + j);
          const uint64_t want = a2a_value(dt, r, c->rank, j, 13);
          CHECK(got == want, "%s: element %zu from rank %d is 0x%llx, expected 0x%llx",
                what, j, r, (unsigned long long)got, (unsigned long long)want);
        }
        off += rc[r];
      }
      if (recv) CHECK(guard_ok(recv, rtotal * es), "%s: wrote past recv", what);
      free(send);
      free(recv);
      c->cases++;
    }
  }
  { /* 16 MiB of bytes, uneven */
    size_t stotal = 0, rtotal = 0, off;
    unsigned char* send;
    unsigned char* recv;
    const size_t base = BIG_BYTES / p;
    for (r = 0; r < c->size; ++r) {
      sc[r] = base - 4096 * (((size_t)c->rank + 2 * (size_t)r) % p);
      rc[r] = base - 4096 * (((size_t)r + 2 * (size_t)c->rank) % p);
      stotal += sc[r];
      rtotal += rc[r];
    }
    send = (unsigned char*)xalloc(stotal);
    recv = (unsigned char*)xalloc(rtotal);
    for (r = 0, off = 0; r < c->size; ++r) {
      fill_mv(send + off, GANG_UINT8, c->rank * 64 + r, 0, sc[r], 14);
      off += sc[r];
    }
    CHECK_OK(gang_all_to_allv(c->g, send, sc, p, recv, rc, p, GANG_UINT8, NULL));
    for (r = 0, off = 0; r < c->size; ++r) {
      if (check_mv("all_to_allv 16 MiB", GANG_UINT8, recv + off, r * 64 + c->rank, 0,
                   rc[r], 14)) return 1;
      off += rc[r];
    }
    free(send);
    free(recv);
    c->cases++;
  }
  free(sc);
  free(rc);
  return 0;
}

/* ---- barrier and point-to-point ------------------------------------------------ */

static int test_barrier(ctx_t* c) {
  volatile int64_t* shared = gang_test_shared_ints();
  int iter, i;
  /* A late rank holds everybody in the barrier. */
  for (iter = 0; iter < 4; ++iter) {
    const int late = iter % c->size;
    const int slot = 16 + iter;
    int64_t entered, left;
    if (c->rank == late) {
      gang_test_sleep_ms(150);
      __atomic_store_n(&shared[slot], gang_test_now_ms(), __ATOMIC_SEQ_CST);
    }
    if (iter % 2 == 0) {
      CHECK_OK(gang_barrier(c->g, NULL));
    } else {
      gang_work_t* w = NULL;
      CHECK_OK(gang_barrier(c->g, &w));
      CHECK(w != NULL, "async barrier gave no work");
      CHECK_OK(gang_work_wait(w, -1));
      CHECK_OK(gang_work_destroy(w));
    }
    left = gang_test_now_ms();
    entered = __atomic_load_n(&shared[slot], __ATOMIC_SEQ_CST);
    CHECK(entered != 0 && left >= entered,
          "barrier %d: left at %lld before rank %d entered at %lld", iter,
          (long long)left, late, (long long)entered);
    c->cases++;
  }
  for (i = 0; i < 50; ++i) {
    CHECK_OK(gang_barrier(c->g, NULL));
    c->cases++;
  }
  return 0;
}

static int test_send_recv(ctx_t* c) {
  char what[160];
  int d, src, dst;
  size_t ci;
  if (c->size == 1) {
    int x = 0;
    CHECK_STATUS(gang_send(c->g, &x, 1, GANG_INT32, 0, 0, NULL), GANG_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(gang_recv(c->g, &x, 1, GANG_INT32, 0, 0, NULL), GANG_ERR_INVALID_ARGUMENT);
    c->cases += 2;
    return 0;
  }
  /* Every ordered pair in one global order: blocking sends and receives
   * that cannot deadlock. */
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt);
    for (ci = 0; ci < NCOUNTS; ++ci) {
      const size_t count = kCounts[ci];
      for (src = 0; src < c->size; ++src) {
        for (dst = 0; dst < c->size; ++dst) {
          const int tag = (d * 7 + (int)ci) % 2 ? GANG_TAG_MAX - d : d * 10 + (int)ci;
          const uint64_t salt = 100u + (uint64_t)(src * 16 + dst);
          void* buf;
          if (src == dst || (c->rank != src && c->rank != dst)) continue;
          describe(what, sizeof what, "send/recv", dt, -1, count, 0, -1);
          if (count == 0) {
            if (c->rank == src) {
              CHECK_OK(gang_send(c->g, NULL, 0, dt, dst, tag, NULL));
            } else {
              CHECK_OK(gang_recv(c->g, NULL, 0, dt, src, tag, NULL));
            }
            c->cases++;
            continue;
          }
          buf = xalloc(count * es);
          if (c->rank == src) {
            fill_mv(buf, dt, src, 0, count, salt);
            CHECK_OK(gang_send(c->g, buf, count, dt, dst, tag, NULL));
            if (check_mv(what, dt, buf, src, 0, count, salt)) return 1;
          } else {
            CHECK_OK(gang_recv(c->g, buf, count, dt, src, tag, NULL));
            if (check_mv(what, dt, buf, src, 0, count, salt)) return 1;
            CHECK(guard_ok(buf, count * es), "%s: wrote past buf", what);
          }
          free(buf);
          c->cases++;
        }
      }
    }
  }
  { /* 16 MiB from rank 0 to the last rank */
    const int last = c->size - 1;
    if (c->rank == 0 || c->rank == last) {
      unsigned char* buf = (unsigned char*)xalloc(BIG_BYTES);
      if (c->rank == 0) {
        fill_mv(buf, GANG_UINT8, 0, 0, BIG_BYTES, 15);
        CHECK_OK(gang_send(c->g, buf, BIG_BYTES, GANG_UINT8, last, 5, NULL));
      } else {
        CHECK_OK(gang_recv(c->g, buf, BIG_BYTES, GANG_UINT8, 0, 5, NULL));
        if (check_mv("send/recv 16 MiB", GANG_UINT8, buf, 0, 0, BIG_BYTES, 15)) return 1;
      }
      free(buf);
    }
    c->cases++;
  }
  /* Everybody is done before anybody destroys the gang. */
  CHECK_OK(gang_barrier(c->g, NULL));
  return 0;
}

/* ---- the matrix --------------------------------------------------------------- */

typedef int (*coll_fn)(ctx_t* c);

typedef struct coll {
  const char* name;
  coll_fn fn;
} coll_t;

static const coll_t kColls[] = {
    {"all_reduce", test_all_reduce},
    {"reduce", test_reduce},
    {"broadcast", test_broadcast},
    {"all_gather", test_all_gather},
    {"all_gatherv", test_all_gatherv},
    {"gather", test_gather},
    {"scatter", test_scatter},
    {"reduce_scatter", test_reduce_scatter},
    {"reduce_scatterv", test_reduce_scatterv},
    {"all_to_all", test_all_to_all},
    {"all_to_allv", test_all_to_allv},
    {"barrier", test_barrier},
    {"send_recv", test_send_recv},
};

static int rank_main(gang_t* g, int rank, int size, void* arg) {
  const coll_t* coll = (const coll_t*)arg;
  volatile int64_t* shared = gang_test_shared_ints();
  ctx_t c;
  c.g = g;
  c.rank = rank;
  c.size = size;
  c.cases = 0;
  c.sym_hash = REF_HASH_INIT;
  CHECK(gang_rank(g) == rank && gang_size(g) == size, "rank/size mismatch");
  if (coll->fn(&c) != 0) return 1;
  if (rank == 0) __atomic_store_n(&shared[0], (int64_t)c.cases, __ATOMIC_SEQ_CST);
  return 0;
}

static void run_matrix(int which, int n) {
  const coll_t* coll = &kColls[which];
  const int rc = gang_test_run_ranks(n, NULL, rank_main, (void*)coll, 60000, 150);
  if (rc == 0) {
    printf("%s n=%d: %lld cases ok\n", coll->name, n,
           (long long)gang_test_shared_ints()[0]);
    fflush(stdout);
  }
  assert_int_equal(rc, 0);
}

#define COLL_LIST(X)                                                         \
  X(all_reduce, 0) X(reduce, 1) X(broadcast, 2) X(all_gather, 3)             \
  X(all_gatherv, 4) X(gather, 5) X(scatter, 6) X(reduce_scatter, 7)          \
  X(reduce_scatterv, 8) X(all_to_all, 9) X(all_to_allv, 10) X(barrier, 11)   \
  X(send_recv, 12)

#define DEFINE_TESTS(name, idx)                                              \
  static void test_##name##_n1(void** s) { (void)s; run_matrix(idx, 1); }    \
  static void test_##name##_n2(void** s) { (void)s; run_matrix(idx, 2); }    \
  static void test_##name##_n3(void** s) { (void)s; run_matrix(idx, 3); }    \
  static void test_##name##_n4(void** s) { (void)s; run_matrix(idx, 4); }
COLL_LIST(DEFINE_TESTS)

#define LIST_TESTS(name, idx)                                                \
  cmocka_unit_test(test_##name##_n1), cmocka_unit_test(test_##name##_n2),    \
      cmocka_unit_test(test_##name##_n3), cmocka_unit_test(test_##name##_n4),

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {COLL_LIST(LIST_TESTS)};
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
