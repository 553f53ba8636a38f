/*
 * test_async.c - asynchronous work, groups, tags, byte payloads and the
 * training helpers over real Gloo gangs.
 */
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

#define GANG_TIMEOUT_MS 20000
#define WALL_S 90

static void run(int n, gang_test_fn fn) {
  assert_int_equal(gang_test_run_ranks(n, "gloo", fn, NULL, GANG_TIMEOUT_MS, WALL_S), 0);
}

/* Polls a work with gang_work_test until it ends (bounded). */
static gang_status_t poll_work(gang_work_t* w) {
  const int64_t deadline = gang_test_now_ms() + 15000;
  gang_status_t s;
  while ((s = gang_work_test(w)) == GANG_IN_PROGRESS) {
    if (gang_test_now_ms() > deadline) break;
    gang_test_sleep_ms(1);
  }
  return s;
}

/* ---- several works, waited out of order ------------------------------------- */

#define NWORK 8
#define WCOUNT 1000

static int rank_out_of_order(gang_t* g, int rank, int size, void* arg) {
  int64_t* send[NWORK];
  int64_t* recv[NWORK];
  gang_work_t* w[NWORK];
  double* gathered;
  double mine = rank * 0.5;
  int32_t bcast[64];
  gang_work_t* wg = NULL;
  gang_work_t* wb = NULL;
  int i, j, r;
  (void)arg;
  gathered = (double*)malloc(sizeof(double) * (size_t)size);
  CHECK(gathered != NULL, "malloc");
  for (i = 0; i < NWORK; ++i) {
    send[i] = (int64_t*)malloc(WCOUNT * sizeof(int64_t));
    recv[i] = (int64_t*)malloc(WCOUNT * sizeof(int64_t));
    CHECK(send[i] != NULL && recv[i] != NULL, "malloc");
    for (j = 0; j < WCOUNT; ++j) send[i][j] = (int64_t)(i * 1000 + j) * (rank + 1);
    w[i] = NULL;
    CHECK_OK(gang_all_reduce(g, send[i], recv[i], WCOUNT, GANG_INT64,
                             i % 2 ? GANG_MAX : GANG_SUM, &w[i]));
    CHECK(w[i] != NULL, "work %d is NULL", i);
  }
  /* Other collectives queue behind them. */
  CHECK_OK(gang_all_gather(g, &mine, gathered, 1, GANG_FLOAT64, &wg));
  for (i = 0; i < 64; ++i) bcast[i] = rank == size - 1 ? i * 3 : -1;
  CHECK_OK(gang_broadcast(g, bcast, 64, GANG_INT32, size - 1, &wb));

  /* Wait for the last first, poll the middle ones, wait the rest. */
  CHECK_OK(gang_work_wait(wb, -1));
  for (i = NWORK - 1; i >= 0; --i) {
    if (i % 3 == 1) {
      CHECK_STATUS(poll_work(w[i]), GANG_OK);
    } else {
      CHECK_OK(gang_work_wait(w[i], -1));
    }
    /* Waiting again returns the same status. */
    CHECK_OK(gang_work_wait(w[i], 0));
    CHECK_OK(gang_work_test(w[i]));
  }
  CHECK_OK(gang_work_wait(wg, 5000));
  for (i = 0; i < NWORK; ++i) {
    for (j = 0; j < WCOUNT; ++j) {
      const int64_t base = (int64_t)(i * 1000 + j);
      const int64_t want = i % 2 ? base * size : base * size * (size + 1) / 2;
      CHECK(recv[i][j] == want, "work %d element %d is %lld, expected %lld", i, j,
            (long long)recv[i][j], (long long)want);
    }
    CHECK_OK(gang_work_destroy(w[i]));
    free(send[i]);
    free(recv[i]);
  }
  for (r = 0; r < size; ++r) {
    CHECK(gathered[r] == r * 0.5, "gathered[%d] = %g", r, gathered[r]);
  }
  for (i = 0; i < 64; ++i) CHECK(bcast[i] == i * 3, "bcast[%d] = %d", i, bcast[i]);
  CHECK_OK(gang_work_destroy(wg));
  CHECK_OK(gang_work_destroy(wb));
  free(gathered);

  /* A blocking call issued behind queued work takes its turn. */
  {
    int64_t in[4], out[4], x = rank + 1, y = 0;
    gang_work_t* wq[4];
    for (i = 0; i < 4; ++i) {
      in[i] = rank * 10 + i;
      out[i] = -1;
      CHECK_OK(gang_all_reduce(g, &in[i], &out[i], 1, GANG_INT64, GANG_SUM, &wq[i]));
    }
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_MAX, NULL));
    CHECK(y == size, "blocking max behind queued work is %lld", (long long)y);
    for (i = 0; i < 4; ++i) {
      const int64_t want = 10 * (int64_t)size * (size - 1) / 2 + (int64_t)i * size;
      CHECK_OK(gang_work_wait(wq[i], -1));
      CHECK(out[i] == want, "queued sum %d is %lld, expected %lld", i, (long long)out[i],
            (long long)want);
      CHECK_OK(gang_work_destroy(wq[i]));
    }
  }
  /* Destroying a work that is still running waits for it. */
  {
    int64_t x = rank + 1, y = 0;
    gang_work_t* wd = NULL;
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &wd));
    CHECK_OK(gang_work_destroy(wd));
    CHECK(y == (int64_t)size * (size + 1) / 2, "sum after work_destroy is %lld", (long long)y);
  }
  /* A count-0 operation still gives a work that completes. */
  {
    gang_work_t* wz = NULL;
    CHECK_OK(gang_all_reduce(g, NULL, NULL, 0, GANG_FLOAT32, GANG_SUM, &wz));
    CHECK(wz != NULL, "count-0 work is NULL");
    CHECK_OK(gang_work_wait(wz, -1));
    CHECK_OK(gang_work_destroy(wz));
  }
  return 0;
}

static void test_out_of_order_n2(void** s) { (void)s; run(2, rank_out_of_order); }
static void test_out_of_order_n3(void** s) { (void)s; run(3, rank_out_of_order); }

/* ---- a late peer ------------------------------------------------------------------ */

#define SLOT_EARLY_CHECKED 1

static int rank_late_peer(gang_t* g, int rank, int size, void* arg) {
  float x = (float)(rank + 1), y = 0;
  gang_work_t* w = NULL;
  (void)arg;
  if (rank == size - 1) {
    /* The late rank: join only after the others have seen it missing. */
    CHECK(gang_test_wait_shared(SLOT_EARLY_CHECKED, size - 1, 15000) == 0,
          "the early ranks never finished their checks");
    gang_test_sleep_ms(50);
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_FLOAT32, GANG_SUM, NULL));
  } else {
    int64_t t0, waited;
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_FLOAT32, GANG_SUM, &w));
    CHECK_STATUS(gang_work_wait(w, 0), GANG_IN_PROGRESS);
    CHECK_STATUS(gang_work_test(w), GANG_IN_PROGRESS);
    t0 = gang_test_now_ms();
    CHECK_STATUS(gang_work_wait(w, 200), GANG_IN_PROGRESS);
    waited = gang_test_now_ms() - t0;
    CHECK(waited >= 190, "gang_work_wait(w, 200) returned after %lld ms", (long long)waited);
    CHECK(waited < 5000, "gang_work_wait(w, 200) took %lld ms", (long long)waited);
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_EARLY_CHECKED], 1, __ATOMIC_SEQ_CST);
    CHECK_OK(gang_work_wait(w, -1));
    CHECK_OK(gang_work_destroy(w));
  }
  CHECK(y == (float)(size * (size + 1) / 2), "sum %g", (double)y);
  return 0;
}

static void test_wait_in_progress(void** s) {
  (void)s;
  run(2, rank_late_peer);
  run(3, rank_late_peer);
}

/* ---- groups ---------------------------------------------------------------------- */

#define RING_COUNT 4099

/* Each rank sends to both neighbours and receives from both in one group:
 * a ring shift in both directions. */
static int rank_ring(gang_t* g, int rank, int size, void* arg) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int32_t* to_next = (int32_t*)malloc(RING_COUNT * sizeof(int32_t));
  int32_t* to_prev = (int32_t*)malloc(RING_COUNT * sizeof(int32_t));
  int32_t* from_prev = (int32_t*)malloc(RING_COUNT * sizeof(int32_t));
  int32_t* from_next = (int32_t*)malloc(RING_COUNT * sizeof(int32_t));
  int round, j;
  (void)arg;
  CHECK(to_next && to_prev && from_prev && from_next, "malloc");
  for (round = 0; round < 3; ++round) {
    gang_work_t* w = NULL;
    for (j = 0; j < RING_COUNT; ++j) {
      to_next[j] = rank * 1000000 + j + round;
      to_prev[j] = -(rank * 1000000 + j + round);
      from_prev[j] = from_next[j] = 0x7eadbeef;
    }
    CHECK_OK(gang_group_start(g));
    /* Receives first on odd ranks, sends first on even ones: order within
     * a group does not matter. */
    if (rank % 2) {
      CHECK_OK(gang_recv(g, from_prev, RING_COUNT, GANG_INT32, prev, 1, NULL));
      CHECK_OK(gang_recv(g, from_next, RING_COUNT, GANG_INT32, next, 2, NULL));
    }
    CHECK_OK(gang_send(g, to_next, RING_COUNT, GANG_INT32, next, 1, NULL));
    CHECK_OK(gang_send(g, to_prev, RING_COUNT, GANG_INT32, prev, 2, NULL));
    if (rank % 2 == 0) {
      CHECK_OK(gang_recv(g, from_prev, RING_COUNT, GANG_INT32, prev, 1, NULL));
      CHECK_OK(gang_recv(g, from_next, RING_COUNT, GANG_INT32, next, 2, NULL));
    }
    if (round == 1) {
      CHECK_OK(gang_group_end(g, &w));
      CHECK(w != NULL, "group_end gave no work");
      CHECK_STATUS(poll_work(w), GANG_OK);
      CHECK_OK(gang_work_destroy(w));
    } else {
      CHECK_OK(gang_group_end(g, NULL));
    }
    for (j = 0; j < RING_COUNT; ++j) {
      CHECK(from_prev[j] == prev * 1000000 + j + round,
            "round %d: element %d from rank %d is %d", round, j, prev, from_prev[j]);
      CHECK(from_next[j] == -(next * 1000000 + j + round),
            "round %d: element %d from rank %d is %d", round, j, next, from_next[j]);
    }
  }
  /* An empty group is a no-op; groups do not nest; end without start. */
  CHECK_OK(gang_group_start(g));
  CHECK_STATUS(gang_group_start(g), GANG_ERR_INVALID_ARGUMENT);
  {
    gang_work_t* w = (gang_work_t*)&w;
    CHECK_OK(gang_group_end(g, &w));
    if (w != NULL) {
      CHECK_OK(gang_work_wait(w, -1));
      CHECK_OK(gang_work_destroy(w));
    }
  }
  CHECK_STATUS(gang_group_end(g, NULL), GANG_ERR_INVALID_ARGUMENT);
  /* A collective inside a group runs with it. */
  {
    int64_t x = rank + 1, y = 0;
    int32_t got = 0, mine = rank;
    CHECK_OK(gang_group_start(g));
    CHECK_OK(gang_send(g, &mine, 1, GANG_INT32, next, 9, NULL));
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK_OK(gang_recv(g, &got, 1, GANG_INT32, prev, 9, NULL));
    CHECK_OK(gang_group_end(g, NULL));
    CHECK(y == (int64_t)size * (size + 1) / 2, "sum in a group %lld", (long long)y);
    CHECK(got == prev, "got %d from rank %d", got, prev);
  }
  /* Operations in a group take work == NULL. */
  {
    int32_t v = 0;
    gang_work_t* w = NULL;
    CHECK_OK(gang_group_start(g));
    CHECK_STATUS(gang_send(g, &v, 1, GANG_INT32, next, 3, &w), GANG_ERR_INVALID_ARGUMENT);
    CHECK_OK(gang_group_end(g, NULL));
  }
  CHECK_OK(gang_barrier(g, NULL));
  free(to_next);
  free(to_prev);
  free(from_prev);
  free(from_next);
  return 0;
}

static void test_group_ring(void** s) {
  (void)s;
  run(2, rank_ring);
  run(3, rank_ring);
  run(4, rank_ring);
}

/* ---- tags ------------------------------------------------------------------------- */

static int rank_tags(gang_t* g, int rank, int size, void* arg) {
  const char first[] = "first message, tag 10";
  const char second[] = "second, tag 20";
  char a[sizeof first], b[sizeof second];
  int32_t x1 = 111, x2 = 222, y1 = 0, y2 = 0;
  (void)arg;
  (void)size;
  if (rank == 0) {
    /* Sent in one order (a group, so neither send waits for its receive)... */
    CHECK_OK(gang_group_start(g));
    CHECK_OK(gang_send(g, first, sizeof first, GANG_UINT8, 1, 10, NULL));
    CHECK_OK(gang_send(g, second, sizeof second, GANG_UINT8, 1, 20, NULL));
    CHECK_OK(gang_group_end(g, NULL));
    /* ...and two messages with equal tags, which match in issue order. */
    CHECK_OK(gang_group_start(g));
    CHECK_OK(gang_send(g, &x1, 1, GANG_INT32, 1, GANG_TAG_MAX, NULL));
    CHECK_OK(gang_send(g, &x2, 1, GANG_INT32, 1, GANG_TAG_MAX, NULL));
    CHECK_OK(gang_group_end(g, NULL));
  } else if (rank == 1) {
    /* ...received in the other. */
    CHECK_OK(gang_recv(g, b, sizeof b, GANG_UINT8, 0, 20, NULL));
    CHECK_OK(gang_recv(g, a, sizeof a, GANG_UINT8, 0, 10, NULL));
    CHECK(memcmp(a, first, sizeof a) == 0, "tag 10 brought \"%.*s\"", (int)sizeof a, a);
    CHECK(memcmp(b, second, sizeof b) == 0, "tag 20 brought \"%.*s\"", (int)sizeof b, b);
    CHECK_OK(gang_recv(g, &y1, 1, GANG_INT32, 0, GANG_TAG_MAX, NULL));
    CHECK_OK(gang_recv(g, &y2, 1, GANG_INT32, 0, GANG_TAG_MAX, NULL));
    CHECK(y1 == 111 && y2 == 222, "equal tags arrived as %d, %d", y1, y2);
  }
  /* Asynchronous receives posted in reverse tag order. */
  if (rank == 0) {
    CHECK_OK(gang_group_start(g));
    CHECK_OK(gang_send(g, &x1, 1, GANG_INT32, 1, 5, NULL));
    CHECK_OK(gang_send(g, &x2, 1, GANG_INT32, 1, 6, NULL));
    CHECK_OK(gang_group_end(g, NULL));
  } else if (rank == 1) {
    gang_work_t* w6 = NULL;
    gang_work_t* w5 = NULL;
    y1 = y2 = 0;
    CHECK_OK(gang_recv(g, &y2, 1, GANG_INT32, 0, 6, &w6));
    CHECK_OK(gang_recv(g, &y1, 1, GANG_INT32, 0, 5, &w5));
    CHECK_OK(gang_work_wait(w5, -1));
    CHECK_OK(gang_work_wait(w6, -1));
    CHECK(y1 == 111 && y2 == 222, "async receives got %d, %d", y1, y2);
    CHECK_OK(gang_work_destroy(w5));
    CHECK_OK(gang_work_destroy(w6));
  }
  CHECK_OK(gang_barrier(g, NULL));
  return 0;
}

static void test_tags(void** s) {
  (void)s;
  run(2, rank_tags);
  run(3, rank_tags);
}

/* ---- byte payloads and helpers ------------------------------------------------------ */

static size_t bytes_len(int rank, int round) {
  static const size_t lens[] = {0, 1, 17, 4096, 1u << 20};
  return lens[(size_t)(rank + round) % 5];
}

static unsigned char byte_at(int rank, size_t i) {
  return (unsigned char)((i * 31u + (size_t)rank * 7u + (i >> 8)) & 0xffu);
}

static int check_bytes(const unsigned char* p, size_t n, int src) {
  size_t i;
  for (i = 0; i < n; ++i) {
    CHECK(p[i] == byte_at(src, i), "byte %zu from rank %d is %u", i, src, p[i]);
  }
  return 0;
}

static int rank_bytes(gang_t* g, int rank, int size, void* arg) {
  unsigned char* mine;
  int round, root, r;
  (void)arg;
  mine = (unsigned char*)malloc((1u << 20) + 1);
  CHECK(mine != NULL, "malloc");
  for (round = 0; round < 2; ++round) {
    const size_t len = bytes_len(rank, round);
    size_t* lens = (size_t*)malloc(sizeof(size_t) * (size_t)size);
    void* out = NULL;
    size_t off = 0, i;
    CHECK(lens != NULL, "malloc");
    for (i = 0; i < len; ++i) mine[i] = byte_at(rank, i);

    /* broadcast_bytes from every root; data and len ignored off root. */
    for (root = 0; root < size; ++root) {
      size_t out_len = 12345;
      out = NULL;
      CHECK_OK(gang_broadcast_bytes(g, rank == root ? mine : NULL,
                                    rank == root ? len : 999, root, &out, &out_len));
      CHECK(out != NULL, "broadcast_bytes gave NULL (length %zu)", out_len);
      CHECK(out_len == bytes_len(root, round), "broadcast_bytes from %d: length %zu", root,
            out_len);
      if (check_bytes((const unsigned char*)out, out_len, root)) return 1;
      gang_free(out);
    }

    /* all_gather_bytes with different lengths, 0 included. */
    out = NULL;
    CHECK_OK(gang_all_gather_bytes(g, len ? mine : NULL, len, &out, lens, (size_t)size));
    CHECK(out != NULL, "all_gather_bytes gave NULL");
    for (r = 0; r < size; ++r) {
      CHECK(lens[r] == bytes_len(r, round), "lens[%d] = %zu", r, lens[r]);
      if (check_bytes((const unsigned char*)out + off, lens[r], r)) return 1;
      off += lens[r];
    }
    gang_free(out);

    /* send_bytes / recv_bytes along every ordered pair, in one global order. */
    {
      int src, dst;
      for (src = 0; src < size; ++src) {
        for (dst = 0; dst < size; ++dst) {
          if (src == dst) continue;
          if (rank == src) {
            CHECK_OK(gang_send_bytes(g, len ? mine : NULL, len, dst, 40 + round));
          } else if (rank == dst) {
            size_t n = 777;
            void* got = NULL;
            CHECK_OK(gang_recv_bytes(g, src, 40 + round, &got, &n));
            CHECK(got != NULL, "recv_bytes gave NULL (length %zu)", n);
            CHECK(n == bytes_len(src, round), "recv_bytes from %d: length %zu", src, n);
            if (check_bytes((const unsigned char*)got, n, src)) return 1;
            gang_free(got);
          }
        }
      }
    }
    free(lens);
  }
  /* broadcast_flag: any nonzero is 1. */
  for (root = 0; root < size; ++root) {
    static const int flags[] = {0, 1, 42, -1};
    int k;
    for (k = 0; k < 4; ++k) {
      int out = -5;
      CHECK_OK(gang_broadcast_flag(g, rank == root ? flags[k] : 1 - (rank % 2), root, &out));
      CHECK(out == (flags[k] != 0), "broadcast_flag(%d) from %d gave %d", flags[k], root, out);
    }
  }
  /* all_sum: the same on every rank. */
  {
    double out = 0, want = 0;
    uint64_t bits, all[64];
    for (r = 0; r < size; ++r) want += r + 0.25;
    CHECK_OK(gang_all_sum(g, rank + 0.25, &out));
    CHECK(out == want, "all_sum gave %.17g, expected %.17g", out, want);
    memcpy(&bits, &out, sizeof bits);
    CHECK_OK(gang_all_gather(g, &bits, all, 1, GANG_UINT64, NULL));
    for (r = 0; r < size; ++r) CHECK(all[r] == bits, "all_sum differs on rank %d", r);
  }
  free(mine);
  return 0;
}

static void test_bytes_and_helpers(void** s) {
  (void)s;
  run(2, rank_bytes);
  run(3, rank_bytes);
}

/* ---- huge timeouts ------------------------------------------------------------------- */

/* gang_work_wait with a huge bound waits for the operation, like -1. */
static int rank_wait_huge(gang_t* g, int rank, int size, void* arg) {
  int64_t x = 1, y = 0, t0, dt;
  gang_work_t* w = NULL;
  gang_status_t s;
  (void)arg;
  if (rank == size - 1) gang_test_sleep_ms(300); /* the others wait for it */
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w));
  t0 = gang_test_now_ms();
  s = gang_work_wait(w, INT64_MAX);
  dt = gang_test_now_ms() - t0;
  CHECK(s == GANG_OK, "gang_work_wait(w, INT64_MAX) returned %s after %lld ms",
        gang_status_name(s), (long long)dt);
  CHECK(y == size, "sum %lld", (long long)y);
  CHECK_OK(gang_work_destroy(w));
  return 0;
}

static void test_wait_huge_timeout(void** s) {
  (void)s;
  run(2, rank_wait_huge);
}

/* A huge gang timeout is either refused or works; it must not turn into a
 * deadline in the past. */
static int rank_set_timeout_huge(gang_t* g, int rank, int size, void* arg) {
  static const int64_t huge[] = {INT64_MAX, INT64_MAX / 2, (int64_t)1 << 50};
  int64_t x = 1, y = 0;
  size_t i;
  (void)rank;
  (void)arg;
  for (i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
    const gang_status_t s = gang_set_timeout(g, huge[i]);
    if (s == GANG_ERR_INVALID_ARGUMENT) continue; /* refused: fine */
    CHECK(s == GANG_OK, "gang_set_timeout(%lld) returned %s", (long long)huge[i],
          gang_status_name(s));
    y = 0;
    CHECK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL) == GANG_OK,
          "all_reduce after gang_set_timeout(%lld) failed", (long long)huge[i]);
    CHECK(y == size, "sum %lld", (long long)y);
  }
  return 0;
}

static void test_set_timeout_huge(void** s) {
  (void)s;
  run(2, rank_set_timeout_huge);
}

/* ---- threads ------------------------------------------------------------------------- */

typedef struct driver {
  gang_t* g;
  int rank;
  int size;
  int seed;
  int failed;
} driver_t;

/* Many all-reduces on one gang from one thread. */
static void* drive(void* p) {
  driver_t* d = (driver_t*)p;
  int i, j;
  int32_t x[33], y[33];
  for (i = 0; i < 150 && !d->failed; ++i) {
    for (j = 0; j < 33; ++j) x[j] = d->seed * 1000 + i + j * (d->rank + 1);
    if (gang_all_reduce(d->g, x, y, 33, GANG_INT32, GANG_SUM, NULL) != GANG_OK) {
      fprintf(stderr, "[rank %d] thread %d: all_reduce %d failed: %s\n", d->rank, d->seed, i,
              gang_last_error());
      d->failed = 1;
      break;
    }
    for (j = 0; j < 33; ++j) {
      const int32_t want = d->size * (d->seed * 1000 + i) + j * d->size * (d->size + 1) / 2;
      if (y[j] != want) {
        fprintf(stderr, "[rank %d] thread %d: iteration %d element %d is %d, expected %d\n",
                d->rank, d->seed, i, j, y[j], want);
        d->failed = 1;
        break;
      }
    }
  }
  return NULL;
}

/* Different gangs are independent: one thread per gang, all at once. */
static int rank_threads(gang_t* g, int rank, int size, void* arg) {
  gang_t* gangs[3];
  driver_t d[3];
  pthread_t th[3];
  int i;
  (void)arg;
  gangs[0] = g;
  CHECK_OK(gang_split(g, 0, rank, &gangs[1]));
  CHECK_OK(gang_split(g, 0, -rank, &gangs[2]));
  for (i = 0; i < 3; ++i) {
    d[i].g = gangs[i];
    d[i].rank = gang_rank(gangs[i]);
    d[i].size = size;
    d[i].seed = i + 1;
    d[i].failed = 0;
    CHECK(pthread_create(&th[i], NULL, drive, &d[i]) == 0, "pthread_create");
  }
  for (i = 0; i < 3; ++i) pthread_join(th[i], NULL);
  for (i = 0; i < 3; ++i) CHECK(!d[i].failed, "thread %d failed", i);
  CHECK_OK(gang_destroy(gangs[1]));
  CHECK_OK(gang_destroy(gangs[2]));
  return 0;
}

static void test_threads_on_gangs(void** s) {
  (void)s;
  run(3, rank_threads);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_out_of_order_n2),
      cmocka_unit_test(test_out_of_order_n3),
      cmocka_unit_test(test_wait_in_progress),
      cmocka_unit_test(test_group_ring),
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_bytes_and_helpers),
      cmocka_unit_test(test_threads_on_gangs),
      cmocka_unit_test(test_wait_huge_timeout),
      cmocka_unit_test(test_set_timeout_huge),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
