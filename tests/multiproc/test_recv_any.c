/*
 * test_recv_any.c - gang_recv_any: receives from whichever rank sends first,
 * on real gangs (gloo; shm and two levels by GANG_TEST_BACKEND and
 * GANG_TEST_HOSTS, see CMakeLists.txt), by MPI's matching rules.
 *
 * Every message carries its sender and its place in the sender's order in
 * every element, so a receive that got the wrong message, or one sender's
 * messages out of order, is seen in the bytes, not only in *source.
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

/* Element j of the seq-th message of `sender`. */
static int32_t value(int sender, int seq, size_t j) {
  return (int32_t)(sender * 1000003 + seq * 7919 + (int)(j % 65521));
}

static void fill(int32_t* buf, size_t n, int sender, int seq) {
  size_t j;
  for (j = 0; j < n; ++j) buf[j] = value(sender, seq, j);
}

static int verify(const int32_t* buf, size_t n, int sender, int seq, const char* what) {
  size_t j;
  for (j = 0; j < n; ++j) {
    CHECK(buf[j] == value(sender, seq, j),
          "%s: element %zu is %d, expected %d (message %d of rank %d)", what, j, buf[j],
          value(sender, seq, j), seq, sender);
  }
  return 0;
}

/* ---- every sender, in each sender's order ------------------------------------ */

/* Every other rank sends rank 0 three messages with one tag; rank 0 takes
 * them with receives from any source. It gets each rank's three, each
 * rank's in the order that rank sent them (non-overtaking), small (in the
 * frame) and large (streamed) alike. */
static int rank_every_sender(gang_t* g, int rank, int size, void* arg) {
  static const size_t counts[] = {3, (size_t)1 << 17};
  enum { kMessages = 3, kTag = 5 };
  size_t c;
  (void)arg;
  for (c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    const size_t n = counts[c];
    int32_t* buf = (int32_t*)malloc(kMessages * n * sizeof(int32_t));
    CHECK(buf != NULL, "malloc");
    if (rank == 0) {
      int next[64] = {0};
      int m;
      for (m = 0; m < kMessages * (size - 1); ++m) {
        int source = -1;
        memset(buf, 0xee, n * sizeof(int32_t));
        CHECK_OK(gang_recv_any(g, buf, n, GANG_INT32, kTag, &source, NULL));
        CHECK(source > 0 && source < size, "receive %d: source %d", m, source);
        CHECK(next[source] < kMessages, "receive %d: a %dth message from rank %d", m,
              next[source] + 1, source);
        if (verify(buf, n, source, next[source], "recv_any")) return 1;
        ++next[source];
      }
    } else {
      gang_work_t* works[kMessages];
      int m;
      for (m = 0; m < kMessages; ++m) {
        fill(buf + m * n, n, rank, m);
        CHECK_OK(gang_send(g, buf + m * n, n, GANG_INT32, 0, kTag, &works[m]));
      }
      for (m = 0; m < kMessages; ++m) {
        CHECK_OK(gang_work_wait(works[m], -1));
        CHECK_OK(gang_work_destroy(works[m]));
      }
    }
    CHECK_OK(gang_barrier(g, NULL));
    free(buf);
  }
  return 0;
}

static void test_every_sender_n2(void** s) { (void)s; run(2, rank_every_sender); }
static void test_every_sender_n4(void** s) { (void)s; run(4, rank_every_sender); }

/* ---- receives match in the order they were posted ----------------------------- */

/* Rank 0 posts a receive from any source, then one from the last rank,
 * both with tag 7, before anything was sent; then the last rank sends two
 * messages with tag 7. The receive posted first takes the first (MPI), the
 * named one the second; other tags and other ranks' messages do not
 * interfere. */
static int rank_posted_order(gang_t* g, int rank, int size, void* arg) {
  enum { kTag = 7, kOtherTag = 8 };
  const size_t n = 4099;
  const int last = size - 1;
  int32_t* a = (int32_t*)malloc(n * sizeof(int32_t));
  int32_t* b = (int32_t*)malloc(n * sizeof(int32_t));
  int32_t* other = (int32_t*)malloc(n * sizeof(int32_t));
  (void)arg;
  CHECK(a && b && other, "malloc");
  if (rank == 0) {
    gang_work_t* any = NULL;
    gang_work_t* named = NULL;
    int source = -1;
    CHECK_OK(gang_recv_any(g, a, n, GANG_INT32, kTag, &source, &any));
    CHECK_OK(gang_recv(g, b, n, GANG_INT32, last, kTag, &named));
    CHECK_OK(gang_barrier(g, NULL));
    CHECK_OK(gang_work_wait(any, -1));
    CHECK_OK(gang_work_wait(named, -1));
    CHECK(source == last, "the receive from any source got rank %d's message", source);
    if (verify(a, n, last, 0, "the receive posted first")) return 1;
    if (verify(b, n, last, 1, "the named receive posted second")) return 1;
    CHECK_OK(gang_work_destroy(any));
    CHECK_OK(gang_work_destroy(named));
    if (size > 2) {  /* the other tag's message, from rank 1 */
      CHECK_OK(gang_recv_any(g, other, n, GANG_INT32, kOtherTag, &source, NULL));
      CHECK(source == 1, "tag %d came from rank %d", kOtherTag, source);
      if (verify(other, n, 1, 9, "the other tag")) return 1;
    }
  } else {
    CHECK_OK(gang_barrier(g, NULL));
    if (rank == last) {
      fill(a, n, rank, 0);
      fill(b, n, rank, 1);
      CHECK_OK(gang_send(g, a, n, GANG_INT32, 0, kTag, NULL));
      CHECK_OK(gang_send(g, b, n, GANG_INT32, 0, kTag, NULL));
    } else if (rank == 1) {
      fill(other, n, rank, 9);
      CHECK_OK(gang_send(g, other, n, GANG_INT32, 0, kOtherTag, NULL));
    }
  }
  CHECK_OK(gang_barrier(g, NULL));
  free(a);
  free(b);
  free(other);
  return 0;
}

static void test_posted_order_n2(void** s) { (void)s; run(2, rank_posted_order); }
static void test_posted_order_n3(void** s) { (void)s; run(3, rank_posted_order); }

/* ---- what is refused ----------------------------------------------------------- */

static int rank_refused(gang_t* g, int rank, int size, void* arg) {
  int32_t x[4] = {0, 0, 0, 0};
  int source = -1;
  (void)arg;
  (void)size;
  CHECK(gang_recv_any(g, x, 4, GANG_INT32, 0, NULL, NULL) == GANG_ERR_INVALID_ARGUMENT,
        "source NULL was accepted");
  CHECK(strstr(gang_last_error(), "source") != NULL, "the error does not name source: %s",
        gang_last_error());
  CHECK(gang_recv_any(g, x, 4, GANG_INT32, -1, &source, NULL) == GANG_ERR_INVALID_ARGUMENT,
        "tag -1 was accepted");
  CHECK_OK(gang_group_start(g));
  CHECK(gang_recv_any(g, x, 4, GANG_INT32, 0, &source, NULL) == GANG_ERR_INVALID_ARGUMENT,
        "a receive from any source inside a group was accepted");
  CHECK(strstr(gang_last_error(), "group") != NULL, "the error does not say group: %s",
        gang_last_error());
  CHECK_OK(gang_group_end(g, NULL));
  CHECK(gang_recv_any(NULL, x, 4, GANG_INT32, 0, &source, NULL) == GANG_ERR_INVALID_ARGUMENT,
        "a NULL gang was accepted");
  if (rank == 0) {
    gang_t* fake = NULL;
    CHECK_OK(gang_create_fake(0, 2, &fake));
    CHECK(gang_recv_any(fake, x, 4, GANG_INT32, 0, &source, NULL) == GANG_ERR_UNSUPPORTED,
          "a fake gang received from any source");
    CHECK_OK(gang_destroy(fake));
  }
  CHECK_OK(gang_barrier(g, NULL));
  return 0;
}

static void test_refused_n2(void** s) { (void)s; run(2, rank_refused); }

/* ---- a message of another size -------------------------------------------------- */

/* Rank 1 sends 5 elements where rank 0 receives 4 from any source: rank 0
 * gets GANG_ERR_MISMATCH naming rank 1 (the sender may see it too). */
static int rank_mismatch(gang_t* g, int rank, int size, void* arg) {
  int32_t x[5] = {1, 2, 3, 4, 5};
  int source = -1;
  (void)arg;
  (void)size;
  if (rank == 0) {
    const gang_status_t st = gang_recv_any(g, x, 4, GANG_INT32, 3, &source, NULL);
    CHECK(st == GANG_ERR_MISMATCH, "a 5-element message in a 4-element receive: %s",
          gang_status_name(st));
    CHECK(strstr(gang_last_error(), "rank 1") != NULL, "the error does not name rank 1: %s",
          gang_last_error());
  } else if (rank == 1) {
    const gang_status_t st = gang_send(g, x, 5, GANG_INT32, 0, 3, NULL);
    CHECK(st == GANG_OK || st == GANG_ERR_MISMATCH, "the sender: %s", gang_status_name(st));
  }
  return 0;
}

static void test_mismatch_n2(void** s) { (void)s; run(2, rank_mismatch); }

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_sender_n2), cmocka_unit_test(test_every_sender_n4),
      cmocka_unit_test(test_posted_order_n2), cmocka_unit_test(test_posted_order_n3),
      cmocka_unit_test(test_refused_n2),      cmocka_unit_test(test_mismatch_n2),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
