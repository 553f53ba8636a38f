/*
 * test_divergence.c - ranks that disagree about a collective never keep a
 * silently different result: the collective, or at the latest the next one,
 * fails on every rank with GANG_ERR_MISMATCH (or a failure it caused:
 * PEER_LOST, ABORTED) within a second, never at the gang's timeout.
 *
 * Each case runs on shm, gloo and two levels (shm within a host, gloo
 * between hosts), on 2, 3 and 4 ranks, with payloads below and above
 * 32 KiB where the size matters (small broadcasts on shm do not meet).
 * Every rank prints one line: case, backend, ranks, the two statuses and
 * the milliseconds until its first error.
 *
 * Every rank keeps its gang until all are done, so that no rank's wait
 * ends because a peer that failed went away.
 *
 * test_gloo_chain_again runs the chain (rank 1 names another root, so the
 * root sends it data it never receives) on 4 gloo ranks CHAIN_AGAIN times:
 * whether the root hears of it in time depends on which of its transfers
 * are queued when the others close their connections, and Gloo's pair
 * left a queued send's wait to its deadline (on the library before, 1 of
 * 12 runs of the whole test, 4 of 120 runs of this case).
 */
#define _GNU_SOURCE
#include <pthread.h>
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

#define TIMEOUT_MS 30000 /* far beyond the second a mismatch may take */
#define LIMIT_MS 1000
#define WALL_S 60
#define SMALL 4      /* floats: 16 bytes */
#define LARGE 16384  /* floats: 64 KiB */
#define CHAIN_AGAIN 60

typedef struct div_case {
  const char* name;
  /* The operation the ranks disagree on; `n` floats where a size applies. */
  gang_status_t (*fn)(gang_t* g, int rank, int size, size_t n);
  int sized; /* run with SMALL and LARGE */
} div_case_t;

typedef struct run_arg {
  const div_case_t* c;
  size_t n;
} run_arg_t;

static float* floats(size_t n, float v) {
  float* p = (float*)malloc(n * sizeof *p);
  size_t i;
  for (i = 0; i < n; ++i) p[i] = v;
  return p;
}

/* Every rank passes its own rank as the root (the common bug). */
static gang_status_t root_own(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, (float)(rank + 1));
  gang_status_t s;
  (void)size;
  s = gang_broadcast(g, x, n, GANG_FLOAT32, rank, NULL);
  free(x);
  return s;
}

/* Rank 0 believes rank 1 is the root, the others rank 0: nobody posts
 * what the first two wait for. */
static gang_status_t root_split(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, (float)(rank + 1));
  gang_status_t s;
  (void)size;
  s = gang_broadcast(g, x, n, GANG_FLOAT32, rank == 0 ? 1 : 0, NULL);
  free(x);
  return s;
}

/* Rank 1 believes the last rank is the root, the others rank 0: on three
 * ranks or more a chain (rank 1 waits for a rank that waits for rank 0)
 * that no two-rank exchange closes. */
static gang_status_t root_chain(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, (float)(rank + 1));
  gang_status_t s;
  s = gang_broadcast(g, x, n, GANG_FLOAT32, rank == 1 ? size - 1 : 0, NULL);
  free(x);
  return s;
}

/* Two ranks each act as the root, in turns, then all agree: only a check
 * of the broadcasts before the next one finds the first. */
static gang_status_t root_then_agree(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, (float)(rank + 1));
  gang_status_t s;
  (void)size;
  s = gang_broadcast(g, x, n, GANG_FLOAT32, rank == 0 ? 0 : 1, NULL);
  if (s == GANG_OK) s = gang_broadcast(g, x, n, GANG_FLOAT32, 0, NULL);
  free(x);
  return s;
}

static gang_status_t count_differs(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, 1.0f);
  gang_status_t s;
  s = gang_broadcast(g, x, rank == size - 1 ? n / 2 : n, GANG_FLOAT32, 0, NULL);
  free(x);
  return s;
}

static gang_status_t dtype_differs(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, 1.0f);
  gang_status_t s;
  s = gang_broadcast(g, x, n, rank == size - 1 ? GANG_INT32 : GANG_FLOAT32, 0,
                     NULL);
  free(x);
  return s;
}

static gang_status_t op_differs(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, 1.0f);
  gang_status_t s;
  s = gang_all_reduce(g, x, x, n, GANG_FLOAT32,
                      rank == size - 1 ? GANG_MAX : GANG_SUM, NULL);
  free(x);
  return s;
}

/* all_reduce on rank 0, broadcast from rank 0 on the others. */
static gang_status_t kind_differs(gang_t* g, int rank, int size, size_t n) {
  float* x = floats(n, 1.0f);
  gang_status_t s;
  (void)size;
  s = rank == 0 ? gang_all_reduce(g, x, x, n, GANG_FLOAT32, GANG_SUM, NULL)
                : gang_broadcast(g, x, n, GANG_FLOAT32, 0, NULL);
  free(x);
  return s;
}

static gang_status_t flag_root_own(gang_t* g, int rank, int size, size_t n) {
  int out = -1;
  (void)size;
  (void)n;
  return gang_broadcast_flag(g, rank & 1, rank, &out);
}

static gang_status_t bytes_root_own(gang_t* g, int rank, int size, size_t n) {
  char msg[32];
  void* out = NULL;
  size_t len = 0;
  gang_status_t s;
  (void)size;
  (void)n;
  snprintf(msg, sizeof msg, "rank %d", rank);
  s = gang_broadcast_bytes(g, msg, strlen(msg), rank, &out, &len);
  gang_free(out);
  return s;
}

static const div_case_t kCases[] = {
    {"broadcast, root = own rank", root_own, 1},
    {"broadcast, ranks wait for each other", root_split, 1},
    {"broadcast, rank 1 waits for a receiver", root_chain, 1},
    {"broadcast, two roots, then agree", root_then_agree, 1},
    {"broadcast, count differs", count_differs, 1},
    {"broadcast, dtype differs", dtype_differs, 1},
    {"all_reduce, op differs", op_differs, 1},
    {"all_reduce vs broadcast", kind_differs, 1},
    {"broadcast_flag, root = own rank", flag_root_own, 0},
    {"broadcast_bytes, root = own rank", bytes_root_own, 0},
};

static const div_case_t kChain = {"broadcast, rank 1 waits for a receiver", root_chain, 1};

/* shared ints per rank: [0] first status, [1] next status, [2] ms to the
 * first error, [3] the next collective's result; after them, how many
 * ranks are done. */
static volatile int64_t* slot(int rank) { return gang_test_shared_ints() + 4 * rank; }
#define DONE_SLOT (4 * 8)
/* A rank keeps its gang until every rank is done (or this long): a rank
 * that failed does not end its peers' waits by going away. */
#define HOLD_MS 3000

static int run_case(gang_t* g, int rank, int size, void* p) {
  const run_arg_t* a = (const run_arg_t*)p;
  const int64_t t0 = gang_test_now_ms();
  float one = 1.0f;
  gang_status_t s1, s2 = GANG_OK;
  int64_t failed_at = -1;
  s1 = a->c->fn(g, rank, size, a->n);
  if (s1 != GANG_OK) failed_at = gang_test_now_ms() - t0;
  /* The next collective, whatever the first did on this rank. */
  s2 = gang_all_reduce(g, &one, &one, 1, GANG_FLOAT32, GANG_SUM, NULL);
  if (s2 != GANG_OK && failed_at < 0) failed_at = gang_test_now_ms() - t0;
  slot(rank)[0] = s1;
  slot(rank)[1] = s2;
  slot(rank)[2] = failed_at;
  slot(rank)[3] = (int64_t)one;
  __atomic_add_fetch(&gang_test_shared_ints()[DONE_SLOT], 1, __ATOMIC_SEQ_CST);
  (void)gang_test_wait_shared(DONE_SLOT, size, HOLD_MS);
  return 0;
}

static int failure_it_caused(gang_status_t s) {
  return s == GANG_ERR_MISMATCH || s == GANG_ERR_PEER_LOST ||
         s == GANG_ERR_ABORTED;
}

static int run_one(const div_case_t* c, const char* label, const char* backend,
                   int hosts, int size, size_t n) {
  gang_test_opts_t o;
  run_arg_t arg;
  int r, bad = 0, mismatches = 0;
  char hosts_text[8];
  arg.c = c;
  arg.n = n;
  snprintf(hosts_text, sizeof hosts_text, "%d", hosts);
  if (hosts > 0) {
    setenv("GANG_TEST_HOSTS", hosts_text, 1);
  } else {
    unsetenv("GANG_TEST_HOSTS");
  }
  gang_test_opts_init(&o);
  o.size = size;
  o.backend = backend;
  o.fn = run_case;
  o.arg = &arg;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  if (gang_test_run(&o) != 0) return 1;
  for (r = 0; r < size; ++r) {
    const gang_status_t s1 = (gang_status_t)slot(r)[0];
    const gang_status_t s2 = (gang_status_t)slot(r)[1];
    const int64_t ms = slot(r)[2];
    const gang_status_t first = s1 != GANG_OK ? s1 : s2;
    printf("divergence | %-36s | %-5s %6zu B | %-9s | %d ranks | rank %d | "
           "%-18s then %-18s | %5lld ms\n",
           c->name, c->sized ? label : "", c->sized ? n * sizeof(float) : 0,
           hosts > 0 ? "two-level" : backend, size, r, gang_status_name(s1),
           gang_status_name(s2), (long long)ms);
    if (first == GANG_ERR_MISMATCH) ++mismatches;
    if (s1 == GANG_OK && s2 == GANG_OK) {
      fprintf(stderr, "%s: rank %d completed the next collective (sum %lld)\n",
              c->name, r, (long long)slot(r)[3]);
      bad = 1;
    } else if (!failure_it_caused(first)) {
      fprintf(stderr, "%s: rank %d failed with %s\n", c->name, r,
              gang_status_name(first));
      bad = 1;
    } else if (ms > LIMIT_MS) {
      fprintf(stderr, "%s: rank %d took %lld ms to fail\n", c->name, r,
              (long long)ms);
      bad = 1;
    }
  }
  if (mismatches == 0) {
    fprintf(stderr, "%s: no rank reported GANG_ERR_MISMATCH\n", c->name);
    bad = 1;
  }
  fflush(stdout);
  return bad;
}

static void run_backend(const char* backend, int hosts) {
  size_t i;
  int size, failures = 0;
  for (i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    for (size = 2; size <= 4; ++size) {
      failures += run_one(&kCases[i], "small", backend, hosts, size, SMALL);
      if (kCases[i].sized) {
        failures += run_one(&kCases[i], "large", backend, hosts, size, LARGE);
      }
    }
  }
  unsetenv("GANG_TEST_HOSTS");
  assert_int_equal(failures, 0);
}

/* Four threads all-reduce on one gang, each its own count, so the orders
 * the ranks issue them in differ from rank to rank: every result is the
 * right sum or the call failed, never a wrong sum without an error. */
#define THREADS 4
#define ROUNDS 50
typedef struct thread_job {
  gang_t* g;
  int rank, size, t;
  int wrong, errors;
} thread_job_t;

static void* thread_all_reduces(void* p) {
  thread_job_t* j = (thread_job_t*)p;
  const size_t n = (size_t)j->t + 1;
  const float want = (float)(j->size * (j->size + 1) / 2);
  int k;
  for (k = 0; k < ROUNDS; ++k) {
    float x[THREADS];
    size_t i;
    for (i = 0; i < n; ++i) x[i] = (float)(j->rank + 1);
    if (gang_all_reduce(j->g, x, x, n, GANG_FLOAT32, GANG_SUM, NULL) != GANG_OK) {
      ++j->errors;
      continue;
    }
    for (i = 0; i < n; ++i) {
      if (x[i] != want) ++j->wrong;
    }
  }
  return NULL;
}

static int run_threads(gang_t* g, int rank, int size, void* arg) {
  pthread_t th[THREADS];
  thread_job_t jobs[THREADS];
  int t, wrong = 0, errors = 0;
  (void)arg;
  for (t = 0; t < THREADS; ++t) {
    jobs[t].g = g;
    jobs[t].rank = rank;
    jobs[t].size = size;
    jobs[t].t = t;
    jobs[t].wrong = jobs[t].errors = 0;
    CHECK(pthread_create(&th[t], NULL, thread_all_reduces, &jobs[t]) == 0,
          "pthread_create");
  }
  for (t = 0; t < THREADS; ++t) {
    pthread_join(th[t], NULL);
    wrong += jobs[t].wrong;
    errors += jobs[t].errors;
  }
  printf("threads | rank %d | %d calls | %d failed | %d wrong sums\n", rank,
         THREADS * ROUNDS, errors, wrong);
  fflush(stdout);
  CHECK(wrong == 0, "%d wrong sums without an error", wrong);
  return 0;
}

static void run_threads_on(const char* backend) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = 2;
  o.backend = backend;
  o.fn = run_threads;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
}

static void test_threads(void** s) {
  (void)s;
  run_threads_on("shm");
  run_threads_on("gloo");
}

static void test_shm(void** s) {
  (void)s;
  run_backend("shm", 0);
}

static void test_gloo(void** s) {
  (void)s;
  run_backend("gloo", 0);
}

static void test_gloo_chain_again(void** s) {
  int i, failures = 0;
  (void)s;
  unsetenv("GANG_TEST_HOSTS");
  for (i = 0; i < CHAIN_AGAIN; ++i) {
    failures += run_one(&kChain, "large", "gloo", 0, 4, LARGE);
  }
  assert_int_equal(failures, 0);
}

static void test_two_level(void** s) {
  (void)s;
  run_backend("auto", 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm),
      cmocka_unit_test(test_gloo),
      cmocka_unit_test(test_gloo_chain_again),
      cmocka_unit_test(test_two_level),
      cmocka_unit_test(test_threads),
  };
  setenv("GANG_LOG_LEVEL", "error", 1);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
