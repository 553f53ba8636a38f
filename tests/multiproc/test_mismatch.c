/*
 * test_mismatch.c - ranks that pass different sizes, dtypes or operations
 * never kill a process and never get GANG_OK with partial data: every rank
 * of a collective returns an error (GANG_ERR_MISMATCH naming both calls
 * where it can be known, else PEER_LOST / TIMEOUT) within the gang's
 * timeout + 2 s, with and without debug checks. For point-to-point the
 * receiver reports the mismatch; the sender gets an error or, when its
 * bytes all went out, GANG_OK.
 *
 * Each case prints one line per rank (attack, rank, status, milliseconds),
 * the table the hardening work quotes.
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

#define TIMEOUT_MS 3000
#define WALL_S 60
#define BIG 70000 /* elements: beyond the inline and direct sizes */

typedef struct attack {
  const char* name;
  int (*fn)(gang_t* g, int rank, int size, gang_status_t* status);
  int p2p;      /* rank 0 sends, rank 1 receives */
  int threaded; /* failed on other threads: no last error on this one */
} attack_t;

static volatile int64_t* results(void) { return gang_test_shared_ints(); }

/* Every rank records (status, ms) of the operation under attack. */
static int run_attack(gang_t* g, int rank, int size, void* arg) {
  const attack_t* a = (const attack_t*)arg;
  gang_status_t s = GANG_OK;
  const int64_t t0 = gang_test_now_ms();
  if (a->fn(g, rank, size, &s) != 0) return 1;
  results()[2 * rank] = (int64_t)s;
  results()[2 * rank + 1] = gang_test_now_ms() - t0;
  if (s == GANG_ERR_MISMATCH && !a->threaded) {
    CHECK(strstr(gang_last_error(), "rank") != NULL, "the message names no rank: %s",
          gang_last_error());
  }
  /* The gang is failed now: later calls are ABORTED at once. */
  if (s != GANG_OK) {
    float x = 0;
    CHECK_STATUS(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL),
                 GANG_ERR_ABORTED);
  }
  return 0;
}

static float* floats(size_t n, float v) {
  float* p = (float*)malloc(n * sizeof *p);
  size_t i;
  for (i = 0; i < n; ++i) p[i] = v;
  return p;
}

static int all_reduce_counts(gang_t* g, int rank, int size, gang_status_t* s) {
  /* The last rank passes twice the count. */
  const size_t n = rank == size - 1 ? 2000 : 1000;
  float* x = floats(n, 1.0f);
  (void)g;
  *s = gang_all_reduce(g, x, x, n, GANG_FLOAT32, GANG_SUM, NULL);
  free(x);
  return 0;
}

static int all_reduce_big_counts(gang_t* g, int rank, int size,
                                 gang_status_t* s) {
  const size_t n = rank == size - 1 ? 2 * BIG : BIG;
  float* x = floats(n, 1.0f);
  *s = gang_all_reduce(g, x, x, n, GANG_FLOAT32, GANG_SUM, NULL);
  free(x);
  return 0;
}

static int all_reduce_dtypes(gang_t* g, int rank, int size, gang_status_t* s) {
  int32_t x[16] = {0};
  (void)size;
  *s = gang_all_reduce(g, x, x, 16, rank == 0 ? GANG_INT32 : GANG_FLOAT32,
                       GANG_SUM, NULL);
  return 0;
}

static int broadcast_counts(gang_t* g, int rank, int size, gang_status_t* s) {
  const size_t n = rank == 0 ? BIG : BIG / 2;
  float* x = floats(BIG, 2.0f);
  (void)size;
  *s = gang_broadcast(g, x, n, GANG_FLOAT32, 0, NULL);
  free(x);
  return 0;
}

static int broadcast_small_counts(gang_t* g, int rank, int size,
                                  gang_status_t* s) {
  float x[8] = {0};
  (void)size;
  *s = gang_broadcast(g, x, rank == 0 ? 8 : 4, GANG_FLOAT32, 0, NULL);
  return 0;
}

static int all_gatherv_counts(gang_t* g, int rank, int size, gang_status_t* s) {
  size_t counts[8];
  int r;
  float* in;
  float* out;
  for (r = 0; r < size; ++r) counts[r] = 100;
  /* The last rank believes rank 0 contributes 300. */
  if (rank == size - 1) counts[0] = 300;
  in = floats(counts[rank], 1.0f);
  out = floats(400 * (size_t)size, 0.0f);
  *s = gang_all_gatherv(g, in, counts[rank], out, counts, (size_t)size,
                        GANG_FLOAT32, NULL);
  free(in);
  free(out);
  return 0;
}

static int all_to_allv_counts(gang_t* g, int rank, int size, gang_status_t* s) {
  size_t sc[8], rc[8];
  int r;
  float* in;
  float* out;
  for (r = 0; r < size; ++r) sc[r] = rc[r] = 50;
  /* Rank 0 sends rank 1 five more than rank 1 expects. */
  if (rank == 0) sc[1] = 55;
  in = floats(60 * (size_t)size, 1.0f);
  out = floats(60 * (size_t)size, 0.0f);
  *s = gang_all_to_allv(g, in, sc, (size_t)size, out, rc, (size_t)size,
                        GANG_FLOAT32, NULL);
  free(in);
  free(out);
  return 0;
}

static int kinds(gang_t* g, int rank, int size, gang_status_t* s) {
  float x[4] = {0};
  (void)size;
  *s = rank == 0 ? gang_all_reduce(g, x, x, 4, GANG_FLOAT32, GANG_SUM, NULL)
                 : gang_broadcast(g, x, 4, GANG_FLOAT32, 0, NULL);
  return 0;
}

static int send_larger(gang_t* g, int rank, int size, gang_status_t* s) {
  float* x = floats(BIG, 1.0f);
  (void)size;
  *s = rank == 0 ? gang_send(g, x, BIG, GANG_FLOAT32, 1, 7, NULL)
                 : gang_recv(g, x, BIG / 2, GANG_FLOAT32, 0, 7, NULL);
  free(x);
  return 0;
}

static int send_smaller(gang_t* g, int rank, int size, gang_status_t* s) {
  float* x = floats(BIG, 1.0f);
  (void)size;
  *s = rank == 0 ? gang_send(g, x, BIG / 2, GANG_FLOAT32, 1, 7, NULL)
                 : gang_recv(g, x, BIG, GANG_FLOAT32, 0, 7, NULL);
  free(x);
  return 0;
}

static int send_larger_small(gang_t* g, int rank, int size, gang_status_t* s) {
  float x[16] = {0};
  (void)size;
  *s = rank == 0 ? gang_send(g, x, 16, GANG_FLOAT32, 1, 3, NULL)
                 : gang_recv(g, x, 2, GANG_FLOAT32, 0, 3, NULL);
  return 0;
}

/* Two threads per rank issue an all_reduce each, of different counts, in
 * an order that differs between ranks. */
struct thread_arg {
  gang_t* g;
  size_t n;
  gang_status_t s;
};
static void* thread_all_reduce(void* p) {
  struct thread_arg* t = (struct thread_arg*)p;
  float* x = floats(t->n, 1.0f);
  t->s = gang_all_reduce(t->g, x, x, t->n, GANG_FLOAT32, GANG_SUM, NULL);
  free(x);
  return NULL;
}
static int two_threads(gang_t* g, int rank, int size, gang_status_t* s) {
  struct thread_arg a = {g, 1000, GANG_OK}, b = {g, 3000, GANG_OK};
  pthread_t ta, tb;
  (void)size;
  /* Rank 0 issues the 1000 first, the others the 3000. */
  CHECK(pthread_create(rank == 0 ? &ta : &tb, NULL, thread_all_reduce,
                       rank == 0 ? &a : &b) == 0, "pthread_create");
  gang_test_sleep_ms(100);
  CHECK(pthread_create(rank == 0 ? &tb : &ta, NULL, thread_all_reduce,
                       rank == 0 ? &b : &a) == 0, "pthread_create");
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  *s = a.s != GANG_OK ? a.s : b.s;
  return 0;
}

static const attack_t kAttacks[] = {
    {"all_reduce 1000 vs 2000 floats", all_reduce_counts, 0, 0},
    {"all_reduce 70000 vs 140000 floats (ring)", all_reduce_big_counts, 0, 0},
    {"all_reduce int32 vs float32", all_reduce_dtypes, 0, 0},
    {"broadcast 70000 vs 35000 floats", broadcast_counts, 0, 0},
    {"broadcast 8 vs 4 floats", broadcast_small_counts, 0, 0},
    {"all_gatherv different recv_counts", all_gatherv_counts, 0, 0},
    {"all_to_allv 55 sent, 50 expected", all_to_allv_counts, 0, 0},
    {"all_reduce vs broadcast", kinds, 0, 0},
    {"send 70000, recv 35000 floats", send_larger, 1, 0},
    {"send 35000, recv 70000 floats", send_smaller, 1, 0},
    {"send 16, recv 2 floats", send_larger_small, 1, 0},
    {"two threads, 1000 and 3000 in other orders", two_threads, 0, 1},
};

static int debug_on;

static int run_one(const attack_t* a, int size) {
  gang_test_opts_t o;
  int r, bad = 0;
  gang_test_opts_init(&o);
  o.size = size;
  o.fn = run_attack;
  o.arg = (void*)a;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  if (gang_test_run(&o) != 0) return 1;
  for (r = 0; r < size; ++r) {
    const gang_status_t s = (gang_status_t)results()[2 * r];
    const int64_t ms = results()[2 * r + 1];
    printf("mismatch%s | %-44s | %d ranks | rank %d | %-24s | %5lld ms\n",
           debug_on ? " (debug)" : "", a->name, size, r, gang_status_name(s),
           (long long)ms);
    if (ms > TIMEOUT_MS + 2000) {
      fprintf(stderr, "%s: rank %d took %lld ms\n", a->name, r, (long long)ms);
      bad = 1;
    }
    if (a->p2p) {
      if (r == 1 && s != GANG_ERR_MISMATCH) {
        fprintf(stderr, "%s: the receiver got %s\n", a->name, gang_status_name(s));
        bad = 1;
      }
    } else if (s == GANG_OK) {
      fprintf(stderr, "%s: rank %d got GANG_OK\n", a->name, r);
      bad = 1;
    }
  }
  fflush(stdout);
  return bad;
}

static void run_all(int debug) {
  size_t i;
  int failures = 0;
  debug_on = debug;
  if (debug) {
    setenv("GANG_DEBUG", "detail", 1);
  } else {
    unsetenv("GANG_DEBUG");
  }
  for (i = 0; i < sizeof kAttacks / sizeof kAttacks[0]; ++i) {
    failures += run_one(&kAttacks[i], 2);
    if (!kAttacks[i].p2p) failures += run_one(&kAttacks[i], 3);
  }
  assert_int_equal(failures, 0);
}

static void test_mismatches(void** s) {
  (void)s;
  run_all(0);
}

static void test_mismatches_debug(void** s) {
  (void)s;
  run_all(1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mismatches),
      cmocka_unit_test(test_mismatches_debug),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
