/*
 * test_threads.c - several threads of one rank on real Gloo gangs: a group
 * open on one thread while another issues, the blocking helpers refused
 * inside a group, and threads hammering gangs of the same members.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

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

#define GANG_TIMEOUT_MS 10000
#define WALL_S 60
/* How long a thread waits for its partner thread before giving up. */
#define HANDOFF_MS 30000

static void run(int n, gang_test_fn fn) {
  assert_int_equal(gang_test_run_ranks(n, "gloo", fn, NULL, GANG_TIMEOUT_MS, WALL_S), 0);
}

static int load_int(const int* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static void store_int(int* p, int v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }

/* Waits until *p >= value; 0 if it got there, -1 after HANDOFF_MS. */
static int wait_stage(const int* p, int value) {
  const int64_t deadline = gang_test_now_ms() + HANDOFF_MS;
  while (load_int(p) < value) {
    if (gang_test_now_ms() > deadline) return -1;
    gang_test_sleep_ms(1);
  }
  return 0;
}

/* ---- a group on one thread while another issues --------------------------------- */

#define BN 513
#define AN 257
#define ROUNDS 3

enum { STAGE_START = 0, STAGE_GROUP_OPEN = 1, STAGE_B_DONE = 2, STAGE_A_GAVE_UP = 3 };

typedef struct issuer {
  gang_t* g;
  int rank;
  int size;
  int round;
  int stage;
  int failed;
  /* Thread B's buffers live here, not on its stack: if an operation were
   * (wrongly) absorbed into thread A's group, it would still write them
   * after thread B returned. */
  int64_t bx[BN];
  int64_t by[BN];
  int32_t cx[BN];
  int32_t cy[BN];
  double bcast[8];
} issuer_t;

/* Reports a failure on a helper thread as one line and flags it. */
static void thread_fail(int* failed, int rank, const char* who, int n, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static void thread_fail(int* failed, int rank, const char* who, int n, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s %d: %s\n", rank, who, n, msg);
  fflush(stderr);
  *failed = 1;
}

#define B_FAIL(...) thread_fail(&d->failed, d->rank, "thread B, round", d->round, __VA_ARGS__)

/* Thread B: once thread A has opened a group on the gang, issue ordinary
 * operations on the same gang. They must run now, not join A's group. */
static void* thread_b(void* p) {
  issuer_t* d = (issuer_t*)p;
  gang_status_t s;
  int j;
  if (wait_stage(&d->stage, STAGE_GROUP_OPEN) != 0) {
    B_FAIL("thread A never opened its group");
    return NULL;
  }
  if (load_int(&d->stage) == STAGE_A_GAVE_UP) return NULL;

  /* A blocking all_reduce: when it returns GANG_OK the sum is there. */
  for (j = 0; j < BN; ++j) {
    d->bx[j] = (int64_t)(d->rank + 1) * (j + 1) + d->round;
    d->by[j] = -7;
  }
  s = gang_all_reduce(d->g, d->bx, d->by, BN, GANG_INT64, GANG_SUM, NULL);
  if (s != GANG_OK) {
    B_FAIL("blocking gang_all_reduce returned %s: %s", gang_status_name(s), gang_last_error());
  } else {
    for (j = 0; j < BN; ++j) {
      const int64_t want =
          (int64_t)d->size * (d->size + 1) / 2 * (j + 1) + (int64_t)d->size * d->round;
      if (d->by[j] != want) {
        B_FAIL("blocking gang_all_reduce returned GANG_OK but element %d is %lld, expected "
               "%lld (the operation did not run)",
               j, (long long)d->by[j], (long long)want);
        break;
      }
    }
  }

  /* An asynchronous all_reduce, waited on this thread. */
  {
    gang_work_t* w = NULL;
    for (j = 0; j < BN; ++j) {
      d->cx[j] = (int32_t)(j - d->rank);
      d->cy[j] = -7;
    }
    s = gang_all_reduce(d->g, d->cx, d->cy, BN, GANG_INT32, GANG_MAX, &w);
    if (s != GANG_OK) {
      B_FAIL("asynchronous gang_all_reduce returned %s: %s", gang_status_name(s),
             gang_last_error());
    } else if (w == NULL) {
      B_FAIL("asynchronous gang_all_reduce gave no work");
    } else {
      s = gang_work_wait(w, -1);
      if (s != GANG_OK) {
        B_FAIL("waiting for the asynchronous all_reduce: %s: %s", gang_status_name(s),
               gang_last_error());
      } else {
        for (j = 0; j < BN; ++j) {
          if (d->cy[j] != j) {
            B_FAIL("asynchronous all_reduce MAX element %d is %d, expected %d", j, d->cy[j], j);
            break;
          }
        }
      }
      gang_work_destroy(w);
    }
  }

  /* A blocking broadcast from the last rank. */
  {
    for (j = 0; j < 8; ++j) d->bcast[j] = d->rank == d->size - 1 ? j * 1.5 + d->round : -1.0;
    s = gang_broadcast(d->g, d->bcast, 8, GANG_FLOAT64, d->size - 1, NULL);
    if (s != GANG_OK) {
      B_FAIL("blocking gang_broadcast returned %s: %s", gang_status_name(s), gang_last_error());
    } else {
      for (j = 0; j < 8; ++j) {
        if (d->bcast[j] != j * 1.5 + d->round) {
          B_FAIL("blocking gang_broadcast returned GANG_OK but element %d is %g", j, d->bcast[j]);
          break;
        }
      }
    }
  }
  store_int(&d->stage, STAGE_B_DONE);
  return NULL;
}

/* Thread A (the rank's own thread): opens a group, lets thread B run its
 * operations to completion, then fills the group and closes it. Every rank
 * does the same, so the gang sees one issue order everywhere. */
static int rank_group_vs_other_thread(gang_t* g, int rank, int size, void* arg) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int round;
  (void)arg;
  for (round = 0; round < ROUNDS; ++round) {
    issuer_t* d = (issuer_t*)calloc(1, sizeof(issuer_t));
    pthread_t th;
    int32_t out[AN], in[AN];
    int64_t ax[AN], ay[AN];
    gang_work_t* w = NULL;
    int j, b_failed;
    CHECK(d != NULL, "calloc");
    d->g = g;
    d->rank = rank;
    d->size = size;
    d->round = round;
    for (j = 0; j < AN; ++j) {
      out[j] = rank * 100000 + j * 3 + round;
      in[j] = -1;
      ax[j] = ((int64_t)(rank + 1) << 20) + j;
      ay[j] = -1;
    }
    CHECK(pthread_create(&th, NULL, thread_b, d) == 0, "pthread_create");

    CHECK_OK(gang_group_start(g));
    store_int(&d->stage, STAGE_GROUP_OPEN);
    if (wait_stage(&d->stage, STAGE_B_DONE) != 0) {
      store_int(&d->stage, STAGE_A_GAVE_UP);
      CHECK(0, "round %d: thread B did not finish its operations in %d ms", round, HANDOFF_MS);
    }
    pthread_join(th, NULL);
    b_failed = d->failed;

    /* Now fill the group: an exchange around the ring and an all_reduce. */
    CHECK_OK(gang_send(g, out, AN, GANG_INT32, right, 7, NULL));
    CHECK_OK(gang_all_reduce(g, ax, ay, AN, GANG_INT64, GANG_SUM, NULL));
    CHECK_OK(gang_recv(g, in, AN, GANG_INT32, left, 7, NULL));
    if (round == 1) {
      CHECK_OK(gang_group_end(g, &w));
      CHECK(w != NULL, "gang_group_end gave no work");
      CHECK_OK(gang_work_wait(w, -1));
      CHECK_OK(gang_work_destroy(w));
    } else {
      CHECK_OK(gang_group_end(g, NULL));
    }
    for (j = 0; j < AN; ++j) {
      const int64_t want = ((int64_t)size * (size + 1) / 2 << 20) + (int64_t)size * j;
      CHECK(in[j] == left * 100000 + j * 3 + round, "round %d: element %d from rank %d is %d",
            round, j, left, in[j]);
      CHECK(ay[j] == want, "round %d: group all_reduce element %d is %lld, expected %lld", round,
            j, (long long)ay[j], (long long)want);
    }
    /* Thread A's own operations were right; now thread B's verdict. */
    CHECK(!b_failed, "round %d: thread B's operations failed (see above)", round);
    free(d);
  }
  /* The gang still works from this thread. */
  {
    int64_t x = rank + 1, y = 0;
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(y == (int64_t)size * (size + 1) / 2, "final sum %lld", (long long)y);
  }
  return 0;
}

static void test_group_vs_other_thread_n2(void** s) { (void)s; run(2, rank_group_vs_other_thread); }
static void test_group_vs_other_thread_n3(void** s) { (void)s; run(3, rank_group_vs_other_thread); }

/* ---- blocking helpers refused inside a group ---------------------------------------- */

enum {
  CALL_BROADCAST_BYTES,
  CALL_ALL_GATHER_BYTES,
  CALL_SEND_OR_RECV_BYTES, /* even ranks send, odd ranks receive */
  CALL_RECV_OR_SEND_BYTES, /* even ranks receive, odd ranks send */
  CALL_BROADCAST_FLAG,
  CALL_ALL_SUM,
  CALL_SPLIT,
  CALL_CREATE_SUBGANG,
  CALL_SPLIT_PARALLEL,
  NCALLS
};

/* Makes call `which` inside an open group on this thread; *name gets the
 * public name the call has. Anything the call returned is freed. */
static gang_status_t call_in_group(gang_t* g, int rank, int size, int which, const char** name) {
  static const char payload[] = "bytes";
  gang_status_t s = GANG_ERR_INTERNAL;
  void* out = NULL;
  size_t out_len = 0;
  const int partner = rank % 2 == 0 ? rank + 1 : rank - 1; /* size is even */
  switch (which) {
    case CALL_BROADCAST_BYTES:
      *name = "gang_broadcast_bytes";
      s = gang_broadcast_bytes(g, payload, sizeof payload, 0, &out, &out_len);
      break;
    case CALL_ALL_GATHER_BYTES: {
      size_t lens[64];
      *name = "gang_all_gather_bytes";
      s = gang_all_gather_bytes(g, payload, sizeof payload, &out, lens, (size_t)size);
      break;
    }
    case CALL_SEND_OR_RECV_BYTES:
    case CALL_RECV_OR_SEND_BYTES:
      if ((rank % 2 == 0) == (which == CALL_SEND_OR_RECV_BYTES)) {
        *name = "gang_send_bytes";
        s = gang_send_bytes(g, payload, sizeof payload, partner, 11);
      } else {
        *name = "gang_recv_bytes";
        s = gang_recv_bytes(g, partner, 11, &out, &out_len);
      }
      break;
    case CALL_BROADCAST_FLAG: {
      int flag = -1;
      *name = "gang_broadcast_flag";
      s = gang_broadcast_flag(g, 1, 0, &flag);
      break;
    }
    case CALL_ALL_SUM: {
      double sum = 0;
      *name = "gang_all_sum";
      s = gang_all_sum(g, 1.0, &sum);
      break;
    }
    case CALL_SPLIT: {
      gang_t* sub = NULL;
      *name = "gang_split";
      s = gang_split(g, rank % 2, rank, &sub);
      gang_destroy(sub);
      break;
    }
    case CALL_CREATE_SUBGANG: {
      int ranks[64];
      gang_t* sub = NULL;
      int r;
      for (r = 0; r < size; ++r) ranks[r] = size - 1 - r;
      *name = "gang_create_subgang";
      s = gang_create_subgang(g, ranks, size, &sub);
      gang_destroy(sub);
      break;
    }
    case CALL_SPLIT_PARALLEL: {
      gang_parallel_config_t cfg;
      gangs_t* gangs = NULL;
      gang_parallel_config_init(&cfg);
      cfg.tp = 2;
      *name = "gangs_split_parallel";
      s = gangs_split_parallel(g, &cfg, &gangs);
      gangs_destroy(gangs);
      break;
    }
    default:
      *name = "?";
      break;
  }
  gang_free(out);
  return s;
}

static int rank_helpers_in_group(gang_t* g, int rank, int size, void* arg) {
  int which, failures = 0;
  (void)arg;
  CHECK(size % 2 == 0 && size <= 64, "needs an even size up to 64, got %d", size);
  for (which = 0; which < NCALLS; ++which) {
    const char* name = "?";
    char err[512];
    gang_status_t s;
    int64_t x = rank + 1, y = 0;
    CHECK_OK(gang_group_start(g));
    s = call_in_group(g, rank, size, which, &name);
    gang_last_error_copy(err, sizeof err);
    CHECK_OK(gang_group_end(g, NULL));
    if (s != GANG_ERR_INVALID_ARGUMENT) {
      gang_test_report(__FILE__, __LINE__, "s == GANG_ERR_INVALID_ARGUMENT",
                       "%s inside an open group returned %s, expected GANG_ERR_INVALID_ARGUMENT",
                       name, gang_status_name(s));
      ++failures;
    } else if (strstr(err, name) == NULL) {
      gang_test_report(__FILE__, __LINE__, "strstr(gang_last_error(), name)",
                       "%s inside an open group: the error \"%s\" does not name the call", name,
                       err);
      ++failures;
    }
    /* The gang still works after the group. */
    CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    CHECK(y == (int64_t)size * (size + 1) / 2, "after %s: sum %lld", name, (long long)y);
  }
  CHECK(failures == 0, "%d of %d calls were not refused inside a group", failures, NCALLS);
  return 0;
}

static void test_helpers_in_group_n2(void** s) { (void)s; run(2, rank_helpers_in_group); }
static void test_helpers_in_group_n4(void** s) { (void)s; run(4, rank_helpers_in_group); }

/* ---- two threads, each on its own gang of the same members ------------------------- */

#define HAMMER_ITERS 200
#define HAMMER_COUNT 19

typedef struct hammer {
  gang_t* g;
  int rank;
  int size;
  int id;
  int async;
  int done;
  int failed;
} hammer_t;

#define H_FAIL(...) thread_fail(&h->failed, h->rank, "hammer thread, iteration", i, __VA_ARGS__)

static void* hammer(void* p) {
  hammer_t* h = (hammer_t*)p;
  int32_t x[HAMMER_COUNT], y[HAMMER_COUNT];
  int i, j;
  for (i = 0; i < HAMMER_ITERS && !h->failed; ++i) {
    gang_status_t s;
    for (j = 0; j < HAMMER_COUNT; ++j) {
      x[j] = h->id * 1000000 + i * 100 + j * (h->rank + 1);
      y[j] = -1;
    }
    if (h->async && i % 2 == 1) {
      gang_work_t* w = NULL;
      s = gang_all_reduce(h->g, x, y, HAMMER_COUNT, GANG_INT32, GANG_SUM, &w);
      if (s == GANG_OK) {
        s = gang_work_wait(w, -1);
        gang_work_destroy(w);
      }
    } else {
      s = gang_all_reduce(h->g, x, y, HAMMER_COUNT, GANG_INT32, GANG_SUM, NULL);
    }
    if (s != GANG_OK) {
      H_FAIL("all_reduce returned %s: %s", gang_status_name(s), gang_last_error());
      break;
    }
    for (j = 0; j < HAMMER_COUNT; ++j) {
      const int32_t want =
          h->size * (h->id * 1000000 + i * 100) + j * h->size * (h->size + 1) / 2;
      if (y[j] != want) {
        H_FAIL("element %d is %d, expected %d", j, y[j], want);
        break;
      }
    }
  }
  store_int(&h->done, 1);
  return NULL;
}

static int rank_two_gangs(gang_t* g, int rank, int size, void* arg) {
  gang_t* gangs[2] = {NULL, NULL};
  hammer_t h[2];
  pthread_t th[2];
  int ranks[64], i, r;
  (void)arg;
  CHECK(size <= 64, "size %d", size);
  for (r = 0; r < size; ++r) ranks[r] = r;
  CHECK_OK(gang_split(g, 0, rank, &gangs[0]));
  CHECK_OK(gang_create_subgang(g, ranks, size, &gangs[1]));
  CHECK(gangs[0] != NULL && gangs[1] != NULL, "no sub-gang");
  for (i = 0; i < 2; ++i) {
    CHECK(gang_size(gangs[i]) == size, "gang %d has size %d", i, gang_size(gangs[i]));
    CHECK(gang_rank(gangs[i]) == rank, "gang %d: rank %d", i, gang_rank(gangs[i]));
    h[i].g = gangs[i];
    h[i].rank = rank;
    h[i].size = size;
    h[i].id = i + 1;
    h[i].async = i;
    h[i].done = 0;
    h[i].failed = 0;
  }
  for (i = 0; i < 2; ++i) {
    CHECK(pthread_create(&th[i], NULL, hammer, &h[i]) == 0, "pthread_create");
  }
  for (i = 0; i < 2; ++i) {
    if (wait_stage(&h[i].done, 1) != 0) {
      /* A hung thread: fail its gang so that the thread returns. */
      gang_abort(gangs[i]);
      CHECK(wait_stage(&h[i].done, 1) == 0, "thread %d hangs even after gang_abort", i + 1);
      h[i].failed = 1;
    }
    pthread_join(th[i], NULL);
  }
  for (i = 0; i < 2; ++i) CHECK(!h[i].failed, "thread %d failed (see above)", i + 1);
  CHECK_OK(gang_destroy(gangs[0]));
  CHECK_OK(gang_destroy(gangs[1]));
  return 0;
}

static void test_two_gangs_n2(void** s) { (void)s; run(2, rank_two_gangs); }
static void test_two_gangs_n3(void** s) { (void)s; run(3, rank_two_gangs); }

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_vs_other_thread_n2),
      cmocka_unit_test(test_group_vs_other_thread_n3),
      cmocka_unit_test(test_helpers_in_group_n2),
      cmocka_unit_test(test_helpers_in_group_n4),
      cmocka_unit_test(test_two_gangs_n2),
      cmocka_unit_test(test_two_gangs_n3),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
