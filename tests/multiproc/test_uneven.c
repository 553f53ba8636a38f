/*
 * test_uneven.c - collectives whose ranks bring blocks of different sizes
 * (the v-collectives, byte payloads, and all-gathers on hosts of unequal
 * size) agree on every choice they make: each call ends with exact results
 * and well within its timeout, never waiting for a peer that chose another
 * algorithm.
 *
 * A property test: from one seed (GANG_TEST_SEED, printed, or a fixed
 * default), each configuration draws a rank count (3-5), per-rank sizes (0,
 * 1, primes, up to 4 MiB) and, for two levels, a layout of hosts; it runs
 * on gloo with each algorithm forced (GANG_GLOO_ALGORITHM), on shm, and on
 * two levels. Every rank draws the same numbers, so the counts agree.
 * Every call must end within CALL_LIMIT_MS; the gang's own timeout is a
 * little longer, so a call that waited for a peer on another path fails
 * here, not at the timeout.
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

#define CALL_LIMIT_MS 5000
#define GANG_TIMEOUT_MS 8000
#define ROUNDS 3
#define MAX_BYTES (4u << 20)

/* splitmix64: the same stream on every rank from the same seed. */
static uint64_t next(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A size in bytes: 0, 1, a prime, or anything up to `max` (log-uniform). */
static size_t draw_size(uint64_t* s, size_t max) {
  static const size_t primes[] = {2, 3, 5, 7, 13, 31, 127, 1021, 8191, 65521, 131071, 1048573};
  size_t v;
  switch (next(s) % 4) {
    case 0:
      v = 0;
      break;
    case 1:
      v = 1;
      break;
    case 2:
      v = primes[next(s) % (sizeof primes / sizeof primes[0])];
      break;
    default: /* log-uniform, so the sizes near every threshold come up */
      v = (size_t)(next(s) % ((size_t)1 << (1 + next(s) % 23)));
      break;
  }
  return v > max ? max : v;
}

static uint8_t byte_of(int rank, int round, size_t i) {
  return (uint8_t)(rank * 37 + round * 11 + i * 7 + (i >> 8));
}

typedef struct run {
  uint64_t seed;
  int size;
} run_t;

#define TIMED(what, call)                                                      \
  do {                                                                         \
    int64_t t0_ = gang_test_now_ms();                                          \
    CHECK_OK(call);                                                            \
    CHECK(gang_test_now_ms() - t0_ <= CALL_LIMIT_MS, "%s took %lld ms",        \
          what, (long long)(gang_test_now_ms() - t0_));                        \
  } while (0)

static int one_round(gang_t* g, int rank, int size, uint64_t* s, int round) {
  size_t counts[8], offs[8], total = 0, i;
  int r, p;
  uint8_t *mine, *all;
  for (r = 0; r < size; ++r) {
    counts[r] = draw_size(s, MAX_BYTES);
    offs[r] = total;
    total += counts[r];
  }
  /* all_gatherv of bytes. */
  mine = (uint8_t*)malloc(counts[rank] + 1);
  all = (uint8_t*)malloc(total + 1);
  CHECK(mine != NULL && all != NULL, "out of memory");
  for (i = 0; i < counts[rank]; ++i) mine[i] = byte_of(rank, round, i);
  TIMED("all_gatherv", gang_all_gatherv(g, mine, counts[rank], all, counts, (size_t)size,
                                        GANG_UINT8, NULL));
  for (r = 0; r < size; ++r) {
    for (i = 0; i < counts[r]; ++i) {
      CHECK(all[offs[r] + i] == byte_of(r, round, i),
            "round %d all_gatherv: rank %d's byte %zu of %zu is wrong (sizes %zu %zu %zu ...)",
            round, r, i, counts[r], counts[0], counts[1], counts[2]);
    }
  }
  /* The same blocks as byte payloads. */
  {
    void* out = NULL;
    size_t lens[8];
    const uint8_t* at;
    TIMED("all_gather_bytes",
          gang_all_gather_bytes(g, mine, counts[rank], &out, lens, (size_t)size));
    at = (const uint8_t*)out;
    for (r = 0; r < size; ++r) {
      CHECK(lens[r] == counts[r], "round %d all_gather_bytes: rank %d sent %zu, got %zu",
            round, r, counts[r], lens[r]);
      for (i = 0; i < lens[r]; ++i) {
        CHECK(at[i] == byte_of(r, round, i), "round %d all_gather_bytes: rank %d byte %zu",
              round, r, i);
      }
      at += lens[r];
    }
    gang_free(out);
  }
  free(mine);
  free(all);

  /* reduce_scatterv of int32 SUM: block r has counts[r] / 4 elements. */
  {
    size_t ec[8], eoff[8], et = 0;
    int32_t *in, *out;
    for (r = 0; r < size; ++r) {
      ec[r] = counts[r] / 4;
      eoff[r] = et;
      et += ec[r];
    }
    in = (int32_t*)malloc((et + 1) * sizeof *in);
    out = (int32_t*)malloc((ec[rank] + 1) * sizeof *out);
    CHECK(in != NULL && out != NULL, "out of memory");
    for (i = 0; i < et; ++i) in[i] = (int32_t)(i % 1000) * (rank + 1);
    TIMED("reduce_scatterv",
          gang_reduce_scatterv(g, in, out, ec, (size_t)size, GANG_INT32, GANG_SUM, NULL));
    for (i = 0; i < ec[rank]; ++i) {
      const int32_t want = (int32_t)((eoff[rank] + i) % 1000) * (size * (size + 1) / 2);
      CHECK(out[i] == want, "round %d reduce_scatterv: element %zu is %d, expected %d", round,
            i, out[i], want);
    }
    free(in);
    free(out);
  }

  /* all_to_allv: rank p sends rank q a block of a size drawn for (p, q). */
  {
    size_t m[8][8], scount[8], rcount[8], soff[8], roff[8], st = 0, rt = 0;
    uint8_t *in, *out;
    for (p = 0; p < size; ++p) {
      for (r = 0; r < size; ++r) m[p][r] = draw_size(s, MAX_BYTES / 4);
    }
    for (r = 0; r < size; ++r) {
      scount[r] = m[rank][r];
      rcount[r] = m[r][rank];
      soff[r] = st;
      roff[r] = rt;
      st += scount[r];
      rt += rcount[r];
    }
    in = (uint8_t*)malloc(st + 1);
    out = (uint8_t*)malloc(rt + 1);
    CHECK(in != NULL && out != NULL, "out of memory");
    for (r = 0; r < size; ++r) {
      for (i = 0; i < scount[r]; ++i) in[soff[r] + i] = byte_of(rank * 8 + r, round, i);
    }
    TIMED("all_to_allv", gang_all_to_allv(g, in, scount, (size_t)size, out, rcount,
                                          (size_t)size, GANG_UINT8, NULL));
    for (r = 0; r < size; ++r) {
      for (i = 0; i < rcount[r]; ++i) {
        CHECK(out[roff[r] + i] == byte_of(r * 8 + rank, round, i),
              "round %d all_to_allv: from rank %d byte %zu", round, r, i);
      }
    }
    free(in);
    free(out);
  }

  /* all_gather of one size for all (on two levels with hosts of unequal
   * size the leaders exchange blocks of unequal size). */
  {
    const size_t n = draw_size(s, MAX_BYTES / 2);
    uint8_t* in = (uint8_t*)malloc(n + 1);
    uint8_t* out = (uint8_t*)malloc(n * (size_t)size + 1);
    CHECK(in != NULL && out != NULL, "out of memory");
    for (i = 0; i < n; ++i) in[i] = byte_of(rank, round, i);
    TIMED("all_gather", gang_all_gather(g, in, out, n, GANG_UINT8, NULL));
    for (r = 0; r < size; ++r) {
      for (i = 0; i < n; ++i) {
        CHECK(out[(size_t)r * n + i] == byte_of(r, round, i),
              "round %d all_gather of %zu: rank %d byte %zu", round, n, r, i);
      }
    }
    free(in);
    free(out);
  }
  return 0;
}

static int rank_fn(gang_t* g, int rank, int size, void* arg) {
  const run_t* run = (const run_t*)arg;
  uint64_t s = run->seed;
  int round;
  CHECK(size == run->size, "size %d", size);
  for (round = 0; round < ROUNDS; ++round) {
    if (one_round(g, rank, size, &s, round) != 0) return 1;
  }
  return 0;
}

/* The shapes first seen to hang: one large block among tiny ones (all
 * ranks but one would take the direct exchange by their own block), and
 * an all-gather on hosts of 2 + 1 + 1 ranks. */
static int named_fn(gang_t* g, int rank, int size, void* arg) {
  static const size_t big[] = {200000, 100000, 70000};
  size_t counts[8], total = 0, i, k;
  int r, first;
  (void)arg;
  for (k = 0; k < sizeof big / sizeof big[0]; ++k) {
    for (first = 0; first < size; ++first) {
      uint8_t *mine, *all, *at;
      total = 0;
      for (r = 0; r < size; ++r) {
        counts[r] = r == first ? big[k] : 1;
        total += counts[r];
      }
      mine = (uint8_t*)malloc(big[k] * (size_t)size);
      all = (uint8_t*)malloc(total > big[k] * (size_t)size ? total : big[k] * (size_t)size);
      CHECK(mine != NULL && all != NULL, "out of memory");
      for (i = 0; i < big[k]; ++i) mine[i] = byte_of(rank, first, i);
      TIMED("all_gatherv", gang_all_gatherv(g, mine, counts[rank], all, counts,
                                            (size_t)size, GANG_UINT8, NULL));
      at = all;
      for (r = 0; r < size; ++r) {
        for (i = 0; i < counts[r]; ++i) {
          CHECK(at[i] == byte_of(r, first, i), "all_gatherv, rank %d's block of %zu", r,
                counts[r]);
        }
        at += counts[r];
      }
      TIMED("all_gather", gang_all_gather(g, mine, all, big[k], GANG_UINT8, NULL));
      for (r = 0; r < size; ++r) {
        for (i = 0; i < big[k]; ++i) {
          CHECK(all[(size_t)r * big[k] + i] == byte_of(r, first, i),
                "all_gather of %zu, rank %d byte %zu", big[k], r, i);
        }
      }
      free(mine);
      free(all);
    }
  }
  return 0;
}

static void run_named(const char* backend, int size, const char* host_of) {
  gang_test_opts_t o;
  if (host_of != NULL) setenv("GANG_TEST_HOST_OF", host_of, 1);
  gang_test_opts_init(&o);
  o.size = size;
  o.backend = backend;
  o.fn = named_fn;
  o.gang_timeout_ms = GANG_TIMEOUT_MS;
  o.wall_timeout_s = 120;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_TEST_HOST_OF");
}

static void test_named_cases(void** state) {
  (void)state;
  run_named("gloo", 3, NULL);
  run_named("gloo", 4, NULL);
  run_named("auto", 4, "0,0,1,2");
  run_named("auto", 5, "0,1,0,2,0");
}

static uint64_t base_seed(void) {
  const char* v = getenv("GANG_TEST_SEED");
  return v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : 0x5eed0033ull;
}

/* One configuration: `backend`, GANG_GLOO_ALGORITHM=`algorithm` (NULL:
 * unset) and, for two levels, a random layout of hosts. */
static void run_config(const char* backend, const char* algorithm, int two_level, int k) {
  uint64_t s = base_seed() + (uint64_t)k * 1000003u;
  run_t run;
  char host_of[64] = "";
  gang_test_opts_t o;
  run.size = 3 + (int)(next(&s) % 3);
  run.seed = next(&s);
  if (algorithm != NULL) {
    setenv("GANG_GLOO_ALGORITHM", algorithm, 1);
  } else {
    unsetenv("GANG_GLOO_ALGORITHM");
  }
  if (two_level) {
    /* Hosts of unequal size, rank order shuffled: at least two hosts. */
    int r, hosts = 2 + (int)(next(&s) % (unsigned)(run.size - 1));
    size_t at = 0;
    for (r = 0; r < run.size; ++r) {
      const int h = r < hosts ? r : (int)(next(&s) % (unsigned)hosts);
      at += (size_t)snprintf(host_of + at, sizeof host_of - at, "%s%d", r ? "," : "", h);
    }
    setenv("GANG_TEST_HOST_OF", host_of, 1);
  } else {
    unsetenv("GANG_TEST_HOST_OF");
  }
  printf("test_uneven: seed %#llx config %d: %s%s%s, %d ranks%s%s\n",
         (unsigned long long)base_seed(), k, backend, algorithm ? " algorithm " : "",
         algorithm ? algorithm : "", run.size, two_level ? ", hosts " : "", host_of);
  fflush(stdout);
  gang_test_opts_init(&o);
  o.size = run.size;
  o.backend = backend;
  o.fn = rank_fn;
  o.arg = &run;
  o.gang_timeout_ms = GANG_TIMEOUT_MS;
  o.wall_timeout_s = 120;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_GLOO_ALGORITHM");
  unsetenv("GANG_TEST_HOST_OF");
}

static void test_gloo_auto(void** state) {
  (void)state;
  run_config("gloo", NULL, 0, 0);
  run_config("gloo", NULL, 0, 1);
}
static void test_gloo_direct(void** state) {
  (void)state;
  run_config("gloo", "direct", 0, 2);
}
static void test_gloo_ring(void** state) {
  (void)state;
  run_config("gloo", "ring", 0, 3);
}
static void test_gloo_tree(void** state) {
  (void)state;
  run_config("gloo", "tree", 0, 4);
}
static void test_shm(void** state) {
  (void)state;
  run_config("shm", NULL, 0, 5);
}
static void test_two_level(void** state) {
  (void)state;
  run_config("auto", NULL, 1, 6);
  run_config("auto", NULL, 1, 7);
  run_config("auto", "direct", 1, 8);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_named_cases),
      cmocka_unit_test(test_gloo_auto), cmocka_unit_test(test_gloo_direct),
      cmocka_unit_test(test_gloo_ring), cmocka_unit_test(test_gloo_tree),
      cmocka_unit_test(test_shm),       cmocka_unit_test(test_two_level),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "test_two_level" */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
