/*
 * test_plugin.c - backend modules (gang/gang_backend.h) found on
 * GANG_PLUGIN_PATH: a working module ("teststore", whose collectives travel
 * through the rendezvous store) in real multi-rank gangs, including split
 * and abort; and modules that cannot be used, each an error naming the file
 * and the reason, after which the process keeps working.
 *
 * CTest sets GANG_PLUGIN_PATH to the directory tests/plugin/CMakeLists.txt
 * builds the modules into.
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

#define TIMEOUT_MS 20000
#define WALL_S 90
#define MAX_SIZE 8

/* Shared slots. */
#define SLOT_DONE 1 /* rank 0 finished its checks (abort tests) */

/* ---- a module that works ------------------------------------------------- */

static int check_all_reduce(gang_t* g, int rank, int size) {
  int32_t i32[5], i32_out[5];
  float f32[4], f32_out[4];
  int64_t i64[3];
  double f64[2];
  int i;
  for (i = 0; i < 5; ++i) i32[i] = (rank + 1) * (i + 1) - 7;
  CHECK_OK(gang_all_reduce(g, i32, i32_out, 5, GANG_INT32, GANG_SUM, NULL));
  for (i = 0; i < 5; ++i) {
    const int32_t want = (i + 1) * size * (size + 1) / 2 - 7 * size;
    CHECK(i32_out[i] == want, "int32 sum [%d] = %d, expected %d", i,
          (int)i32_out[i], (int)want);
  }
  /* Halves and small integers: every partial sum is exact in float32. */
  for (i = 0; i < 4; ++i) f32[i] = 0.5f * (float)(rank + 1) + (float)i;
  CHECK_OK(gang_all_reduce(g, f32, f32_out, 4, GANG_FLOAT32, GANG_SUM, NULL));
  for (i = 0; i < 4; ++i) {
    const float want = 0.25f * (float)(size * (size + 1)) + (float)(i * size);
    CHECK(f32_out[i] == want, "float32 sum [%d] = %g, expected %g", i,
          (double)f32_out[i], (double)want);
  }
  /* In place. */
  for (i = 0; i < 3; ++i) i64[i] = rank * 10 + i;
  CHECK_OK(gang_all_reduce(g, i64, i64, 3, GANG_INT64, GANG_MAX, NULL));
  for (i = 0; i < 3; ++i) {
    CHECK(i64[i] == (int64_t)(size - 1) * 10 + i, "int64 max [%d] = %lld", i,
          (long long)i64[i]);
  }
  f64[0] = rank;
  f64[1] = -2.0 * rank;
  CHECK_OK(gang_all_reduce(g, f64, f64, 2, GANG_FLOAT64, GANG_AVG, NULL));
  CHECK(f64[0] == (size - 1) / 2.0 && f64[1] == -(double)(size - 1),
        "float64 avg = (%g, %g)", f64[0], f64[1]);
  /* A count of 0 is still a collective. */
  CHECK_OK(gang_all_reduce(g, NULL, NULL, 0, GANG_INT32, GANG_SUM, NULL));
  return 0;
}

static int check_broadcast_gather(gang_t* g, int rank, int size) {
  int32_t buf[6], send[3], recv[3 * MAX_SIZE];
  double d = rank == 0 ? 2.5 : -1.0;
  int i, r;
  for (i = 0; i < 6; ++i) buf[i] = rank == size - 1 ? 100 + i : -1;
  CHECK_OK(gang_broadcast(g, buf, 6, GANG_INT32, size - 1, NULL));
  for (i = 0; i < 6; ++i) {
    CHECK(buf[i] == 100 + i, "broadcast [%d] = %d", i, (int)buf[i]);
  }
  CHECK_OK(gang_broadcast(g, &d, 1, GANG_FLOAT64, 0, NULL));
  CHECK(d == 2.5, "broadcast from 0 gave %g", d);

  for (i = 0; i < 3; ++i) send[i] = rank * 100 + i;
  memset(recv, 0xff, sizeof recv);
  CHECK_OK(gang_all_gather(g, send, recv, 3, GANG_INT32, NULL));
  for (r = 0; r < size; ++r) {
    for (i = 0; i < 3; ++i) {
      CHECK(recv[r * 3 + i] == r * 100 + i, "all_gather [%d][%d] = %d", r, i,
            (int)recv[r * 3 + i]);
    }
  }
  CHECK_OK(gang_barrier(g, NULL));
  return 0;
}

/* Byte payloads travel over the core's own control channel, beside the
 * module (which claims no host memory). */
static int check_bytes(gang_t* g, int rank, int size) {
  static const char hello[] = "hello from the root";
  char mine[MAX_SIZE + 1];
  size_t lens[MAX_SIZE], off = 0;
  void* out = NULL;
  size_t out_len = 0;
  int r;
  size_t k;
  CHECK_OK(gang_broadcast_bytes(g, rank == 0 ? hello : NULL,
                                rank == 0 ? sizeof hello : 0, 0, &out,
                                &out_len));
  CHECK(out != NULL && out_len == sizeof hello &&
            memcmp(out, hello, sizeof hello) == 0,
        "broadcast_bytes gave %zu bytes", out_len);
  gang_free(out);

  for (k = 0; k < (size_t)rank + 1; ++k) mine[k] = (char)('a' + rank);
  out = NULL;
  CHECK_OK(gang_all_gather_bytes(g, mine, (size_t)rank + 1, &out, lens,
                                 (size_t)size));
  for (r = 0; r < size; ++r) {
    CHECK(lens[r] == (size_t)r + 1, "rank %d's length %zu", r, lens[r]);
    for (k = 0; k < lens[r]; ++k) {
      CHECK(((const char*)out)[off + k] == (char)('a' + r),
            "all_gather_bytes: rank %d's byte %zu", r, k);
    }
    off += lens[r];
  }
  gang_free(out);
  return 0;
}

/* Point-to-point (tag 0: the module has no tagged point-to-point), alone
 * and in a group. */
static int check_p2p(gang_t* g, int rank, int size) {
  const int to = (rank + 1) % size, from = (rank + size - 1) % size;
  int64_t out = 1000 + rank, in = -1;
  int32_t gout[2], gin[2] = {-1, -1};
  if (size == 1) return 0;
  CHECK_OK(gang_send(g, &out, 1, GANG_INT64, to, 0, NULL));
  CHECK_OK(gang_recv(g, &in, 1, GANG_INT64, from, 0, NULL));
  CHECK(in == 1000 + from, "received %lld from rank %d", (long long)in, from);

  gout[0] = rank;
  gout[1] = -rank;
  CHECK_OK(gang_group_start(g));
  CHECK_OK(gang_recv(g, gin, 2, GANG_INT32, from, 0, NULL));
  CHECK_OK(gang_send(g, gout, 2, GANG_INT32, to, 0, NULL));
  CHECK_OK(gang_group_end(g, NULL));
  CHECK(gin[0] == from && gin[1] == -from, "group received (%d, %d) from %d",
        (int)gin[0], (int)gin[1], from);
  return 0;
}

/* Children by parity: each all-reduces its parent ranks. */
static int check_split(gang_t* g, int rank, int size) {
  const int color = rank % 2;
  gang_t* child = NULL;
  int64_t x = rank, sum = -1, want = 0;
  int members = 0, r;
  for (r = color; r < size; r += 2) {
    want += r;
    ++members;
  }
  CHECK_OK(gang_split(g, color, rank, &child));
  CHECK(child != NULL, "no child gang");
  CHECK(gang_size(child) == members, "child size %d, expected %d",
        gang_size(child), members);
  CHECK(gang_rank(child) == rank / 2, "child rank %d, expected %d",
        gang_rank(child), rank / 2);
  CHECK(strcmp(gang_backend_name(child), "teststore") == 0,
        "child backend \"%s\"", gang_backend_name(child));
  CHECK_OK(gang_all_reduce(child, &x, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == want, "color %d: sum %lld, expected %lld", color, (long long)sum,
        (long long)want);
  CHECK_OK(gang_destroy(child));
  /* The parent still works after its child is gone. */
  CHECK_OK(gang_all_reduce(g, &x, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == (int64_t)size * (size - 1) / 2, "parent sum %lld",
        (long long)sum);
  return 0;
}

static int rank_found(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  CHECK(strcmp(gang_backend_name(g), "teststore") == 0, "backend \"%s\"",
        gang_backend_name(g));
  CHECK(gang_supports(g, GANG_SUM, GANG_INT32) != 0,
        "the module reduces int32");
  CHECK(gang_supports(g, GANG_SUM, GANG_FLOAT16) == 0,
        "the module does not reduce float16");
  if (check_all_reduce(g, rank, size)) return 1;
  if (check_broadcast_gather(g, rank, size)) return 1;
  if (check_bytes(g, rank, size)) return 1;
  if (check_p2p(g, rank, size)) return 1;
  if (check_split(g, rank, size)) return 1;
  /* Once more after everything else: sequence numbers still agree. */
  if (check_all_reduce(g, rank, size)) return 1;
  return 0;
}

static void test_found_n1(void** s) {
  (void)s;
  assert_int_equal(
      gang_test_run_ranks(1, "teststore", rank_found, NULL, TIMEOUT_MS, WALL_S),
      0);
}

static void test_found_n2(void** s) {
  (void)s;
  assert_int_equal(
      gang_test_run_ranks(2, "teststore", rank_found, NULL, TIMEOUT_MS, WALL_S),
      0);
}

static void test_found_n3(void** s) {
  (void)s;
  assert_int_equal(
      gang_test_run_ranks(3, "teststore", rank_found, NULL, TIMEOUT_MS, WALL_S),
      0);
}

/* ---- abort while blocked in the module ----------------------------------- */

typedef struct aborter {
  gang_t* g;
  int64_t at_ms;
  gang_status_t status;
} aborter_t;

static void* abort_later(void* p) {
  aborter_t* a = (aborter_t*)p;
  gang_test_sleep_ms(300);
  a->at_ms = gang_test_now_ms();
  a->status = gang_abort(a->g);
  return NULL;
}

/* Rank 0 blocks in an all_reduce that rank 1 never joins (it sleeps until
 * rank 0 is done); another thread of rank 0 aborts the gang. */
static int rank_abort(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    int64_t x = 1, y = 0, done_at;
    aborter_t a;
    pthread_t th;
    gang_status_t s;
    char first[1024];
    a.g = g;
    a.at_ms = 0;
    a.status = GANG_ERR_INTERNAL;
    CHECK(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create");
    s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    done_at = gang_test_now_ms();
    gang_last_error_copy(first, sizeof first);
    pthread_join(th, NULL);
    __atomic_store_n(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
    fprintf(stderr, "[rank 0] %s %lld ms after gang_abort: %s\n",
            gang_status_name(s), (long long)(done_at - a.at_ms), first);
    CHECK(a.status == GANG_OK, "gang_abort returned %s",
          gang_status_name(a.status));
    CHECK(s == GANG_ERR_ABORTED, "the blocked all_reduce returned %s",
          gang_status_name(s));
    CHECK(a.at_ms != 0 && done_at - a.at_ms < 2000,
          "the blocked all_reduce returned %lld ms after gang_abort",
          (long long)(done_at - a.at_ms));
    CHECK_STATUS(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL),
                 GANG_ERR_ABORTED);
  } else {
    CHECK(gang_test_wait_shared(SLOT_DONE, 1, TIMEOUT_MS) == 0,
          "rank 0 did not finish");
  }
  return 0;
}

static void test_abort_n2(void** s) {
  (void)s;
  assert_int_equal(
      gang_test_run_ranks(2, "teststore", rank_abort, NULL, TIMEOUT_MS, WALL_S),
      0);
}

/* The same wait without an abort ends at the operation's deadline, which the
 * module receives with every operation. */
#define SHORT_TIMEOUT_MS 1000
#define SLACK_MS 2000

static int rank_deadline(gang_t* g, int rank, int size, void* arg) {
  volatile int64_t* shared = gang_test_shared_ints();
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 0) {
    int64_t x = 1, y = 0, t0, elapsed;
    gang_status_t s;
    CHECK_OK(gang_set_timeout(g, SHORT_TIMEOUT_MS));
    t0 = gang_test_now_ms();
    s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
    elapsed = gang_test_now_ms() - t0;
    __atomic_store_n(&shared[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
    fprintf(stderr, "[rank 0] %s after %lld ms: %s\n", gang_status_name(s),
            (long long)elapsed, gang_last_error());
    CHECK(s == GANG_ERR_TIMEOUT, "the unanswered all_reduce returned %s",
          gang_status_name(s));
    CHECK(elapsed >= SHORT_TIMEOUT_MS - 50 &&
              elapsed < SHORT_TIMEOUT_MS + SLACK_MS,
          "the timeout of %d ms struck after %lld ms", SHORT_TIMEOUT_MS,
          (long long)elapsed);
  } else {
    CHECK(gang_test_wait_shared(SLOT_DONE, 1, TIMEOUT_MS) == 0,
          "rank 0 did not finish");
  }
  return 0;
}

static void test_abort_deadline_n2(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "teststore", rank_deadline, NULL,
                                       TIMEOUT_MS, WALL_S),
                   0);
}

/* ---- modules that cannot be used ----------------------------------------- */

/* The process keeps working after a failed load: a Gloo gang of one and a
 * fake gang. */
static void check_process_works(void) {
  gang_options_t o;
  gang_t* g = NULL;
  int64_t x = 3, y = 0;
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = 0;
  o.size = 1;
  o.timeout_ms = TIMEOUT_MS;
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  assert_string_equal(gang_backend_name(g), "gloo");
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL),
                   GANG_OK);
  assert_int_equal(y, 3);
  assert_int_equal(gang_destroy(g), GANG_OK);

  g = NULL;
  y = 0;
  assert_int_equal(gang_create_fake(1, 4, &g), GANG_OK);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL),
                   GANG_OK);
  assert_int_equal(y, 12);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

/* gang_create of a one-rank gang of `backend` fails with `want` and a
 * message holding every one of `needles` (NULL-terminated); twice, since a
 * second attempt must not find a half-loaded module. */
static void expect_create_fails(const char* backend, gang_status_t want,
                                const char* const* needles) {
  int attempt;
  for (attempt = 0; attempt < 2; ++attempt) {
    gang_options_t o;
    gang_t* g = NULL;
    char msg[2048];
    const char* const* n;
    gang_status_t s;
    gang_options_init(&o);
    o.backend = backend;
    o.rank = 0;
    o.size = 1;
    o.timeout_ms = TIMEOUT_MS;
    s = gang_create(&o, &g);
    gang_last_error_copy(msg, sizeof msg);
    print_message("backend \"%s\": %s: %s\n", backend, gang_status_name(s),
                  msg);
    if (s != want) {
      if (s == GANG_OK) gang_destroy(g);
      fail_msg("backend \"%s\": gang_create returned %s, expected %s (%s)",
               backend, gang_status_name(s), gang_status_name(want), msg);
    }
    for (n = needles; *n != NULL; ++n) {
      if (strstr(msg, *n) == NULL) {
        fail_msg("backend \"%s\": the message \"%s\" does not mention \"%s\"",
                 backend, msg, *n);
      }
    }
    check_process_works();
  }
}

static void test_errors_not_found(void** s) {
  static const char* const needles[] = {"nosuchmod", NULL};
  (void)s;
  expect_create_fails("nosuchmod", GANG_ERR_INVALID_ARGUMENT, needles);
}

static void test_errors_wrong_abi(void** s) {
  /* test_backend.c built with abi_version GANG_BACKEND_ABI_VERSION + 98. */
  static const char* const needles[] = {"libgang-testabi.so", "version", "99",
                                        NULL};
  (void)s;
  expect_create_fails("testabi", GANG_ERR_UNAVAILABLE, needles);
}

static void test_errors_no_entry_point(void** s) {
  static const char* const needles[] = {"libgang-testnosym.so",
                                        "gang_backend_plugin", NULL};
  (void)s;
  expect_create_fails("testnosym", GANG_ERR_UNAVAILABLE, needles);
}

static void test_errors_probe_fails(void** s) {
  static const char* const needles[] = {"libgang-testprobe.so",
                                        "no such device", NULL};
  (void)s;
  expect_create_fails("testprobe", GANG_ERR_UNAVAILABLE, needles);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_found_n1),
      cmocka_unit_test(test_found_n2),
      cmocka_unit_test(test_found_n3),
      cmocka_unit_test(test_abort_n2),
      cmocka_unit_test(test_abort_deadline_n2),
      cmocka_unit_test(test_errors_not_found),
      cmocka_unit_test(test_errors_wrong_abi),
      cmocka_unit_test(test_errors_no_entry_point),
      cmocka_unit_test(test_errors_probe_fails),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
