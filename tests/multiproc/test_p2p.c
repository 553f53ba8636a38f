/*
 * test_p2p.c - point-to-point messages over real Gloo gangs: tags matched
 * out of issue order, many outstanding tagged transfers, pipeline-style
 * batches, payloads of any size and collectives issued between transfers.
 *
 * Every case checks the bytes that arrived. The gang timeout is short
 * (GANG_TIMEOUT_MS), so a transfer that can never match fails the case
 * within seconds instead of hanging it.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

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

#define GANG_TIMEOUT_MS 10000
#define WALL_S 60

static void run(int n, gang_test_fn fn) {
  assert_int_equal(gang_test_run_ranks(n, NULL, fn, NULL, GANG_TIMEOUT_MS, WALL_S), 0);
}

/* A small deterministic generator (the C library's rand() state is global
 * and its sequence differs between C libraries; this one does not). */
static uint32_t lcg_next(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  return *state >> 8;
}

/* Fisher-Yates over idx[0..n). */
static void shuffle(int* idx, int n, uint32_t seed) {
  uint32_t st = seed;
  int i;
  for (i = n - 1; i > 0; --i) {
    const int j = (int)(lcg_next(&st) % (uint32_t)(i + 1));
    const int t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

/* ---- the value of element j of the message (sender, tag) --------------------- */

/* Every dtype's element is derived from one 64-bit word, so messages from
 * different senders or with different tags differ in (almost) every element. */
static uint64_t word_at(int sender, int tag, size_t j) {
  uint64_t x = (uint64_t)j * 0x9e3779b97f4a7c15ull;
  x ^= (uint64_t)(uint32_t)tag * 0xbf58476d1ce4e5b9ull;
  x ^= (uint64_t)(uint32_t)(sender + 1) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Writes element j of message (sender, tag) in dtype dt to out. */
static void element(gang_dtype_t dt, int sender, int tag, size_t j, void* out) {
  const uint64_t w = word_at(sender, tag, j);
  switch (dt) {
    case GANG_UINT8: {
      const uint8_t v = (uint8_t)w;
      memcpy(out, &v, sizeof v);
      break;
    }
    case GANG_INT32: {
      const int32_t v = (int32_t)(uint32_t)w;
      memcpy(out, &v, sizeof v);
      break;
    }
    case GANG_INT64: {
      const int64_t v = (int64_t)w;
      memcpy(out, &v, sizeof v);
      break;
    }
    case GANG_FLOAT32: { /* exact: at most 24 significant bits */
      const float v = (float)(w & 0xffffffu) - 8388608.0f;
      memcpy(out, &v, sizeof v);
      break;
    }
    case GANG_FLOAT64: {
      const double v = (double)(w & 0xfffffffffffffull) * 0.25;
      memcpy(out, &v, sizeof v);
      break;
    }
    default:
      memset(out, 0x5a, ref_dtype_size(dt));
      break;
  }
}

static void fill(gang_dtype_t dt, void* buf, size_t count, int sender, int tag) {
  const size_t es = ref_dtype_size(dt);
  size_t j;
  for (j = 0; j < count; ++j) element(dt, sender, tag, j, (char*)buf + j * es);
}

/* 0 if buf holds message (sender, tag); else reports the first bad element. */
static int verify(gang_dtype_t dt, const void* buf, size_t count, int sender, int tag,
                  const char* what) {
  const size_t es = ref_dtype_size(dt);
  unsigned char want[8];
  size_t j;
  for (j = 0; j < count; ++j) {
    element(dt, sender, tag, j, want);
    if (memcmp((const char*)buf + j * es, want, es) != 0) {
      char got_s[64], want_s[64];
      CHECK(0, "%s: %s element %zu of %zu (sender %d, tag %d) is %s, expected %s", what,
            ref_dtype_name(dt), j, count, sender, tag,
            ref_format(dt, ref_load(dt, buf, j), got_s, sizeof got_s),
            ref_format(dt, ref_load(dt, want, 0), want_s, sizeof want_s));
    }
  }
  return 0;
}

/* ---- reversed tag order ------------------------------------------------------ */

/* Each rank sends tag 1 then tag 2 asynchronously to its right neighbour and
 * receives tag 2 and then tag 1, blocking, from its left one. Messages with
 * different tags match by tag, not by issue order, so this completes. */
static int rank_reversed_tags(gang_t* g, int rank, int size, void* arg) {
  static const size_t counts[] = {1, 4099, (size_t)1 << 18};
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  size_t c;
  (void)arg;
  for (c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    const size_t n = counts[c];
    int32_t* s1 = (int32_t*)malloc(n * sizeof(int32_t));
    int32_t* s2 = (int32_t*)malloc(n * sizeof(int32_t));
    int32_t* r1 = (int32_t*)malloc(n * sizeof(int32_t));
    int32_t* r2 = (int32_t*)malloc(n * sizeof(int32_t));
    gang_work_t* w1 = NULL;
    gang_work_t* w2 = NULL;
    CHECK(s1 && s2 && r1 && r2, "malloc");
    fill(GANG_INT32, s1, n, rank, 1);
    fill(GANG_INT32, s2, n, rank, 2);
    memset(r1, 0xee, n * sizeof(int32_t));
    memset(r2, 0xee, n * sizeof(int32_t));
    CHECK_OK(gang_send(g, s1, n, GANG_INT32, right, 1, &w1));
    CHECK_OK(gang_send(g, s2, n, GANG_INT32, right, 2, &w2));
    CHECK(w1 != NULL && w2 != NULL, "async sends gave no work");
    CHECK_OK(gang_recv(g, r2, n, GANG_INT32, left, 2, NULL));
    CHECK_OK(gang_recv(g, r1, n, GANG_INT32, left, 1, NULL));
    if (verify(GANG_INT32, r2, n, left, 2, "tag 2")) return 1;
    if (verify(GANG_INT32, r1, n, left, 1, "tag 1")) return 1;
    CHECK_OK(gang_work_wait(w1, -1));
    CHECK_OK(gang_work_wait(w2, -1));
    CHECK_OK(gang_work_destroy(w1));
    CHECK_OK(gang_work_destroy(w2));
    free(s1);
    free(s2);
    free(r1);
    free(r2);
  }
  return 0;
}

static void test_reversed_tags_n2(void** s) { (void)s; run(2, rank_reversed_tags); }
static void test_reversed_tags_n3(void** s) { (void)s; run(3, rank_reversed_tags); }
static void test_reversed_tags_n4(void** s) { (void)s; run(4, rank_reversed_tags); }

/* ---- 64 outstanding tagged transfers, posted and waited in random orders ---------- */

#define NMSG 64

/* Message i goes from rank src to rank dst_of(src, i) with tag tags[i]; every
 * rank sends NMSG messages and receives NMSG. */
static int dst_of(int src, int i, int size) { return (src + 1 + i % (size - 1)) % size; }

static size_t count_of(int i) { return (size_t)1 + (size_t)(i * 37) % 700; }

typedef struct posted {
  int is_send;
  int peer;
  int msg; /* i */
  int64_t* buf;
  gang_work_t* w;
} posted_t;

static int rank_random_order(gang_t* g, int rank, int size, void* arg) {
  int tags[NMSG];
  posted_t ops[2 * NMSG];
  int order[2 * NMSG];
  int nops = 0, i, k, src;
  uint32_t st = 0x5eed1234u; /* the same on every rank: the same tag set */
  (void)arg;
  /* NMSG distinct tags in [0, GANG_TAG_MAX]. */
  for (i = 0; i < NMSG; ++i) {
    int fresh;
    do {
      tags[i] = (int)(lcg_next(&st) & 0x7fffffu) * 97 + (i % 97);
      fresh = 1;
      for (k = 0; k < i; ++k) fresh &= tags[k] != tags[i];
    } while (!fresh);
  }
  /* My sends, then my receives (from every other rank). */
  for (i = 0; i < NMSG; ++i) {
    posted_t* p = &ops[nops++];
    p->is_send = 1;
    p->peer = dst_of(rank, i, size);
    p->msg = i;
    p->w = NULL;
    p->buf = (int64_t*)malloc(count_of(i) * sizeof(int64_t));
    CHECK(p->buf != NULL, "malloc");
    fill(GANG_INT64, p->buf, count_of(i), rank, tags[i]);
  }
  for (src = 0; src < size; ++src) {
    if (src == rank) continue;
    for (i = 0; i < NMSG; ++i) {
      posted_t* p;
      if (dst_of(src, i, size) != rank) continue;
      CHECK(nops < 2 * NMSG, "more than %d receives", NMSG);
      p = &ops[nops++];
      p->is_send = 0;
      p->peer = src;
      p->msg = i;
      p->w = NULL;
      p->buf = (int64_t*)malloc(count_of(i) * sizeof(int64_t));
      CHECK(p->buf != NULL, "malloc");
      memset(p->buf, 0xee, count_of(i) * sizeof(int64_t));
    }
  }
  CHECK(nops == 2 * NMSG, "%d operations, expected %d", nops, 2 * NMSG);

  /* Post everything in one per-rank order... */
  for (k = 0; k < nops; ++k) order[k] = k;
  shuffle(order, nops, 1000u + (uint32_t)rank);
  for (k = 0; k < nops; ++k) {
    posted_t* p = &ops[order[k]];
    const int tag = tags[p->msg];
    if (p->is_send) {
      CHECK_OK(gang_send(g, p->buf, count_of(p->msg), GANG_INT64, p->peer, tag, &p->w));
    } else {
      CHECK_OK(gang_recv(g, p->buf, count_of(p->msg), GANG_INT64, p->peer, tag, &p->w));
    }
    CHECK(p->w != NULL, "operation %d gave no work", k);
  }
  /* ...and wait in another. */
  shuffle(order, nops, 2000u + (uint32_t)rank * 7u);
  for (k = 0; k < nops; ++k) {
    posted_t* p = &ops[order[k]];
    gang_status_t s = gang_work_wait(p->w, -1);
    CHECK(s == GANG_OK, "%s message %d (tag %d, peer %d) ended %s",
          p->is_send ? "sending" : "receiving", p->msg, tags[p->msg], p->peer,
          gang_status_name(s));
  }
  for (k = 0; k < nops; ++k) {
    posted_t* p = &ops[k];
    if (!p->is_send) {
      char what[64];
      snprintf(what, sizeof what, "message %d from rank %d", p->msg, p->peer);
      if (verify(GANG_INT64, p->buf, count_of(p->msg), p->peer, tags[p->msg], what)) return 1;
    }
    CHECK_OK(gang_work_destroy(p->w));
    free(p->buf);
  }
  return 0;
}

static void test_random_order_n2(void** s) { (void)s; run(2, rank_random_order); }
static void test_random_order_n4(void** s) { (void)s; run(4, rank_random_order); }

/* ---- a pipeline-style batch on a ring of 4 --------------------------------------- */

#define PIPE_COUNT 3001
#define PIPE_ROUNDS 4

/* Activations go right (tag 100 + round), gradients go left (tag 200 +
 * round), all four transfers of a rank in one group. Rounds alternate
 * between gang_group_end(NULL) and a work handle; the last two rounds keep
 * two groups in flight at once. */
static int rank_pipeline(gang_t* g, int rank, int size, void* arg) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  float* act_out[PIPE_ROUNDS];
  float* grad_out[PIPE_ROUNDS];
  float* act_in[PIPE_ROUNDS];
  float* grad_in[PIPE_ROUNDS];
  gang_work_t* w[PIPE_ROUNDS];
  int round;
  (void)arg;
  for (round = 0; round < PIPE_ROUNDS; ++round) {
    act_out[round] = (float*)malloc(PIPE_COUNT * sizeof(float));
    grad_out[round] = (float*)malloc(PIPE_COUNT * sizeof(float));
    act_in[round] = (float*)malloc(PIPE_COUNT * sizeof(float));
    grad_in[round] = (float*)malloc(PIPE_COUNT * sizeof(float));
    CHECK(act_out[round] && grad_out[round] && act_in[round] && grad_in[round], "malloc");
    fill(GANG_FLOAT32, act_out[round], PIPE_COUNT, rank, 100 + round);
    fill(GANG_FLOAT32, grad_out[round], PIPE_COUNT, rank, 200 + round);
    memset(act_in[round], 0xee, PIPE_COUNT * sizeof(float));
    memset(grad_in[round], 0xee, PIPE_COUNT * sizeof(float));
    w[round] = NULL;
  }
  for (round = 0; round < PIPE_ROUNDS; ++round) {
    CHECK_OK(gang_group_start(g));
    CHECK_OK(gang_send(g, act_out[round], PIPE_COUNT, GANG_FLOAT32, right, 100 + round, NULL));
    CHECK_OK(gang_send(g, grad_out[round], PIPE_COUNT, GANG_FLOAT32, left, 200 + round, NULL));
    CHECK_OK(gang_recv(g, act_in[round], PIPE_COUNT, GANG_FLOAT32, left, 100 + round, NULL));
    CHECK_OK(gang_recv(g, grad_in[round], PIPE_COUNT, GANG_FLOAT32, right, 200 + round, NULL));
    if (round == 0) {
      CHECK_OK(gang_group_end(g, NULL));
    } else {
      CHECK_OK(gang_group_end(g, &w[round]));
      CHECK(w[round] != NULL, "round %d: gang_group_end gave no work", round);
      if (round == 1) CHECK_OK(gang_work_wait(w[round], -1));
    }
  }
  /* Rounds 2 and 3 were both in flight: wait the later one first. */
  CHECK_OK(gang_work_wait(w[3], -1));
  CHECK_OK(gang_work_wait(w[2], -1));
  for (round = 0; round < PIPE_ROUNDS; ++round) {
    if (verify(GANG_FLOAT32, act_in[round], PIPE_COUNT, left, 100 + round, "activations"))
      return 1;
    if (verify(GANG_FLOAT32, grad_in[round], PIPE_COUNT, right, 200 + round, "gradients"))
      return 1;
    CHECK_OK(gang_work_destroy(w[round]));
    free(act_out[round]);
    free(grad_out[round]);
    free(act_in[round]);
    free(grad_in[round]);
  }
  return 0;
}

static void test_pipeline_ring_n4(void** s) { (void)s; run(4, rank_pipeline); }

/* ---- payloads of any size ------------------------------------------------------ */

#define NSIZES 6
#define NDTYPES 3

static const size_t any_counts[NSIZES] = {0, 1, 7, 4096, (size_t)1 << 20,
                                          ((size_t)3 << 20) + 5};
static const gang_dtype_t any_dtypes[NDTYPES] = {GANG_UINT8, GANG_FLOAT32, GANG_FLOAT64};

/* Rank 0 and rank 1 each send every (count, dtype) message to the other:
 * sends posted in one order, receives in the reverse, all asynchronous, then
 * waited receives first. */
static int rank_any_size(gang_t* g, int rank, int size, void* arg) {
  const int peer = 1 - rank;
  void* sbuf[NSIZES * NDTYPES];
  void* rbuf[NSIZES * NDTYPES];
  gang_work_t* sw[NSIZES * NDTYPES];
  gang_work_t* rw[NSIZES * NDTYPES];
  const int n = NSIZES * NDTYPES;
  int m;
  (void)arg;
  CHECK(size == 2, "written for 2 ranks, run with %d", size);
  for (m = 0; m < n; ++m) {
    const size_t count = any_counts[m % NSIZES];
    const gang_dtype_t dt = any_dtypes[m / NSIZES];
    const size_t bytes = count * ref_dtype_size(dt);
    sbuf[m] = malloc(bytes ? bytes : 1);
    rbuf[m] = malloc(bytes ? bytes : 1);
    CHECK(sbuf[m] != NULL && rbuf[m] != NULL, "malloc %zu", bytes);
    fill(dt, sbuf[m], count, rank, 10 + m);
    memset(rbuf[m], 0xee, bytes ? bytes : 1);
    sw[m] = rw[m] = NULL;
  }
  /* Rank 0 posts its sends first, rank 1 its receives first. */
  if (rank == 0) {
    for (m = 0; m < n; ++m) {
      CHECK_OK(gang_send(g, any_counts[m % NSIZES] ? sbuf[m] : NULL, any_counts[m % NSIZES],
                         any_dtypes[m / NSIZES], peer, 10 + m, &sw[m]));
    }
  }
  for (m = n - 1; m >= 0; --m) {
    CHECK_OK(gang_recv(g, any_counts[m % NSIZES] ? rbuf[m] : NULL, any_counts[m % NSIZES],
                       any_dtypes[m / NSIZES], peer, 10 + m, &rw[m]));
  }
  if (rank == 1) {
    for (m = 0; m < n; ++m) {
      CHECK_OK(gang_send(g, any_counts[m % NSIZES] ? sbuf[m] : NULL, any_counts[m % NSIZES],
                         any_dtypes[m / NSIZES], peer, 10 + m, &sw[m]));
    }
  }
  for (m = 0; m < n; ++m) {
    const gang_status_t s = gang_work_wait(rw[m], -1);
    CHECK(s == GANG_OK, "receiving %zu %s (tag %d) ended %s", any_counts[m % NSIZES],
          ref_dtype_name(any_dtypes[m / NSIZES]), 10 + m, gang_status_name(s));
  }
  for (m = n - 1; m >= 0; --m) {
    const gang_status_t s = gang_work_wait(sw[m], -1);
    CHECK(s == GANG_OK, "sending %zu %s (tag %d) ended %s", any_counts[m % NSIZES],
          ref_dtype_name(any_dtypes[m / NSIZES]), 10 + m, gang_status_name(s));
  }
  for (m = 0; m < n; ++m) {
    char what[64];
    snprintf(what, sizeof what, "message of %zu", any_counts[m % NSIZES]);
    if (verify(any_dtypes[m / NSIZES], rbuf[m], any_counts[m % NSIZES], peer, 10 + m, what))
      return 1;
    CHECK_OK(gang_work_destroy(sw[m]));
    CHECK_OK(gang_work_destroy(rw[m]));
    free(sbuf[m]);
    free(rbuf[m]);
  }
  return 0;
}

static void test_any_size_n2(void** s) { (void)s; run(2, rank_any_size); }

/* ---- a collective between transfers ------------------------------------------------ */

#define MIX_COUNT 1025

/* mode 0: send (right), all_reduce, recv (left), all asynchronous.
 * mode 1: recv (left), all_reduce, send (right), all asynchronous.
 * mode 2: send (right) asynchronous, all_reduce asynchronous, recv (left)
 *         blocking. */
static int mix_round(gang_t* g, int rank, int size, int mode) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  const int tag = 50 + mode;
  int64_t out[MIX_COUNT], in[MIX_COUNT], x[MIX_COUNT], y[MIX_COUNT];
  gang_work_t* ws = NULL;
  gang_work_t* wr = NULL;
  gang_work_t* wa = NULL;
  int j;
  fill(GANG_INT64, out, MIX_COUNT, rank, tag);
  memset(in, 0xee, sizeof in);
  for (j = 0; j < MIX_COUNT; ++j) {
    x[j] = (int64_t)(rank + 1) * (j + 1) + mode;
    y[j] = -1;
  }
  if (mode == 1) {
    CHECK_OK(gang_recv(g, in, MIX_COUNT, GANG_INT64, left, tag, &wr));
  } else {
    CHECK_OK(gang_send(g, out, MIX_COUNT, GANG_INT64, right, tag, &ws));
  }
  CHECK_OK(gang_all_reduce(g, x, y, MIX_COUNT, GANG_INT64, GANG_SUM, &wa));
  if (mode == 1) {
    CHECK_OK(gang_send(g, out, MIX_COUNT, GANG_INT64, right, tag, &ws));
  } else {
    CHECK_OK(gang_recv(g, in, MIX_COUNT, GANG_INT64, left, tag, mode == 2 ? NULL : &wr));
  }
  if (wr != NULL) CHECK_OK(gang_work_wait(wr, -1));
  CHECK_OK(gang_work_wait(wa, -1));
  CHECK_OK(gang_work_wait(ws, -1));
  for (j = 0; j < MIX_COUNT; ++j) {
    const int64_t want = (int64_t)size * (size + 1) / 2 * (j + 1) + (int64_t)size * mode;
    CHECK(y[j] == want, "mode %d: sum element %d is %lld, expected %lld", mode, j,
          (long long)y[j], (long long)want);
  }
  if (verify(GANG_INT64, in, MIX_COUNT, left, tag, "message around the all_reduce")) return 1;
  CHECK_OK(gang_work_destroy(ws));
  CHECK_OK(gang_work_destroy(wr));
  CHECK_OK(gang_work_destroy(wa));
  return 0;
}

static int rank_mix_send_first(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  if (mix_round(g, rank, size, 0)) return 1;
  return mix_round(g, rank, size, 2);
}

static int rank_mix_recv_first(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  return mix_round(g, rank, size, 1);
}

static void test_mix_send_first_n2(void** s) { (void)s; run(2, rank_mix_send_first); }
static void test_mix_send_first_n3(void** s) { (void)s; run(3, rank_mix_send_first); }
static void test_mix_recv_first_n2(void** s) { (void)s; run(2, rank_mix_recv_first); }
static void test_mix_recv_first_n3(void** s) { (void)s; run(3, rank_mix_recv_first); }

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reversed_tags_n2),  cmocka_unit_test(test_reversed_tags_n3),
      cmocka_unit_test(test_reversed_tags_n4),  cmocka_unit_test(test_random_order_n2),
      cmocka_unit_test(test_random_order_n4),   cmocka_unit_test(test_pipeline_ring_n4),
      cmocka_unit_test(test_any_size_n2),       cmocka_unit_test(test_mix_send_first_n2),
      cmocka_unit_test(test_mix_send_first_n3), cmocka_unit_test(test_mix_recv_first_n2),
      cmocka_unit_test(test_mix_recv_first_n3),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
