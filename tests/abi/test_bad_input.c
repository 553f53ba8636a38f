/*
 * test_bad_input.c - every public function given bad input.
 *
 * Each bad call must return GANG_ERR_INVALID_ARGUMENT (or the documented
 * code), name the offending argument in gang_last_error(), and leave the
 * gang usable: an all-reduce afterwards still works. On a 2-rank Gloo gang
 * only one rank makes the bad calls while the other goes straight to the
 * all-reduce, so a bad call that issued traffic or used a sequence number
 * would show up as a hang or a wrong result.
 */
#define _GNU_SOURCE
#include <limits.h>
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

/* Counts failures in `nfail` (which must be in scope) and goes on, so one
 * run lists every bad call that misbehaves. */
#define EXPECT(expr, want, needle)                                               \
  do {                                                                           \
    gang_status_t e_s_ = (expr);                                                 \
    if (e_s_ != (want)) {                                                        \
      gang_test_report(__FILE__, __LINE__, #expr, "returned %s, expected %s",    \
                       gang_status_name(e_s_), gang_status_name(want));          \
      ++nfail;                                                                   \
    } else if (strstr(gang_last_error(), (needle)) == NULL) {                    \
      gang_test_report(__FILE__, __LINE__, #expr,                                \
                       "the message does not name \"%s\"", (needle));            \
      ++nfail;                                                                   \
    }                                                                            \
  } while (0)

#define BAD(expr, needle) EXPECT(expr, GANG_ERR_INVALID_ARGUMENT, needle)

#define TRUE_OR_COUNT(cond, ...)                                   \
  do {                                                             \
    if (!(cond)) {                                                 \
      gang_test_report(__FILE__, __LINE__, #cond, __VA_ARGS__);    \
      ++nfail;                                                     \
    }                                                              \
  } while (0)

#define BADDT ((gang_dtype_t)42)
#define BADOP ((gang_op_t)42)

static int64_t A[256], B[256];

/* Calls with a NULL gang. Never touch a gang. */
static int null_handles(void) {
  int nfail = 0;
  size_t counts[2] = {1, 1};
  void* out = NULL;
  size_t n = 0, lens[2];
  int flag = 0;
  double d = 0;
  gang_t* sub = NULL;
  gang_status_t st = GANG_OK;
  const int ranks[1] = {0};
  const int twice[2] = {1, 1};
  gangs_t* gangs = NULL;
  gang_parallel_config_t pc;
  int active[4];
  size_t nactive = 0;
  gang_parallel_config_init(&pc);

  BAD(gang_all_reduce(NULL, A, B, 1, GANG_INT64, GANG_SUM, NULL), "gang");
  BAD(gang_reduce(NULL, A, B, 1, GANG_INT64, GANG_SUM, 0, NULL), "gang");
  BAD(gang_broadcast(NULL, A, 1, GANG_INT64, 0, NULL), "gang");
  BAD(gang_all_gather(NULL, A, B, 1, GANG_INT64, NULL), "gang");
  BAD(gang_all_gatherv(NULL, A, 1, B, counts, 2, GANG_INT64, NULL), "gang");
  BAD(gang_gather(NULL, A, B, 1, GANG_INT64, 0, NULL), "gang");
  BAD(gang_scatter(NULL, A, B, 1, GANG_INT64, 0, NULL), "gang");
  BAD(gang_reduce_scatter(NULL, A, B, 1, GANG_INT64, GANG_SUM, NULL), "gang");
  BAD(gang_reduce_scatterv(NULL, A, B, counts, 2, GANG_INT64, GANG_SUM, NULL), "gang");
  BAD(gang_all_to_all(NULL, A, B, 1, GANG_INT64, NULL), "gang");
  BAD(gang_all_to_allv(NULL, A, counts, 2, B, counts, 2, GANG_INT64, NULL), "gang");
  BAD(gang_barrier(NULL, NULL), "gang");
  BAD(gang_send(NULL, A, 1, GANG_INT64, 1, 0, NULL), "gang");
  BAD(gang_recv(NULL, A, 1, GANG_INT64, 1, 0, NULL), "gang");
  BAD(gang_group_start(NULL), "gang");
  BAD(gang_group_end(NULL, NULL), "gang");
  BAD(gang_broadcast_bytes(NULL, A, 8, 0, &out, &n), "gang");
  BAD(gang_all_gather_bytes(NULL, A, 8, &out, lens, 2), "gang");
  BAD(gang_send_bytes(NULL, A, 8, 1, 0), "gang");
  BAD(gang_recv_bytes(NULL, 1, 0, &out, &n), "gang");
  BAD(gang_broadcast_flag(NULL, 1, 0, &flag), "gang");
  BAD(gang_all_sum(NULL, 1.0, &d), "gang");
  BAD(gang_split(NULL, 0, 0, &sub), "gang");
  BAD(gang_create_subgang(NULL, ranks, 1, &sub), "gang");
  BAD(gangs_split_after_loss(NULL, NULL, &pc, &gangs), "old_gang");
  BAD(gang_layout_after_loss(4, NULL, ranks, 1, &pc, active, 4, &nactive), "config");
  BAD(gang_layout_after_loss(4, &pc, ranks, 1, &pc, active, 4, NULL), "n_active");
  BAD(gang_layout_after_loss(4, &pc, ranks, 1, NULL, active, 4, &nactive), "new_config");
  BAD(gang_layout_after_loss(4, &pc, NULL, 1, &pc, active, 4, &nactive), "survivors");
  BAD(gang_layout_after_loss(4, &pc, twice, 2, &pc, active, 4, &nactive), "survivors[1]");
  BAD(gang_layout_after_loss(0, &pc, ranks, 1, &pc, active, 4, &nactive), "gang size");
  BAD(gang_layout_after_loss(4, &pc, ranks, 1, &pc, NULL, 4, &nactive), "active");
  BAD(gang_abort(NULL), "gang");
  BAD(gang_set_timeout(NULL, 1000), "gang");
  BAD(gang_get_async_error(NULL, &st), "gang");
  BAD(gang_work_wait(NULL, -1), "work");
  BAD(gang_work_test(NULL), "work");

  TRUE_OR_COUNT(gang_rank(NULL) == -1, "gang_rank(NULL)");
  TRUE_OR_COUNT(gang_size(NULL) == -1, "gang_size(NULL)");
  TRUE_OR_COUNT(strcmp(gang_backend_name(NULL), "") == 0, "gang_backend_name(NULL)");
  TRUE_OR_COUNT(gang_device_type(NULL) == GANG_DEVICE_CPU, "gang_device_type(NULL)");
  TRUE_OR_COUNT(gang_device_index(NULL) == -1, "gang_device_index(NULL)");
  TRUE_OR_COUNT(strcmp(gang_name(NULL), "") == 0, "gang_name(NULL)");
  TRUE_OR_COUNT(gang_root_rank(NULL, 0) == -1, "gang_root_rank(NULL)");
  TRUE_OR_COUNT(gang_get_timeout(NULL) == -1, "gang_get_timeout(NULL)");
  TRUE_OR_COUNT(gang_supports(NULL, GANG_SUM, GANG_FLOAT32) == 0, "gang_supports(NULL)");
  TRUE_OR_COUNT(gang_store_port(NULL) == -1, "gang_store_port(NULL)");

  EXPECT(gang_destroy(NULL), GANG_OK, "");
  EXPECT(gang_store_destroy(NULL), GANG_OK, "");
  EXPECT(gang_work_destroy(NULL), GANG_OK, "");
  gang_free(NULL);
  return nfail;
}

/* Bad calls on a live gang of `size` ranks in which this is `rank`. None
 * may issue traffic. */
static int battery(gang_t* g, int rank, int size) {
  int nfail = 0;
  const size_t p = (size_t)size;
  const int peer = (rank + 1) % size;
  const size_t off = (size_t)rank * 4;
  size_t counts[8], big[8], i;
  size_t lens[8];
  void* out = NULL;
  size_t n = 0;
  gang_t* sub = NULL;
  gang_work_t* w = NULL;
  const int dup[2] = {0, 0};
  for (i = 0; i < 8; ++i) {
    counts[i] = 4;
    big[i] = SIZE_MAX / 2;
  }

  /* NULL buffers with nonzero counts. */
  BAD(gang_all_reduce(g, NULL, B, 4, GANG_INT64, GANG_SUM, NULL), "send");
  BAD(gang_all_reduce(g, A, NULL, 4, GANG_INT64, GANG_SUM, NULL), "recv");
  BAD(gang_reduce(g, NULL, B, 4, GANG_INT64, GANG_SUM, rank, NULL), "send");
  BAD(gang_reduce(g, A, NULL, 4, GANG_INT64, GANG_SUM, rank, NULL), "recv");
  BAD(gang_broadcast(g, NULL, 4, GANG_INT64, 0, NULL), "buf");
  BAD(gang_all_gather(g, NULL, B, 4, GANG_INT64, NULL), "send");
  BAD(gang_all_gather(g, A, NULL, 4, GANG_INT64, NULL), "recv");
  BAD(gang_all_gatherv(g, NULL, 4, B, counts, p, GANG_INT64, NULL), "send");
  BAD(gang_all_gatherv(g, A, 4, NULL, counts, p, GANG_INT64, NULL), "recv");
  BAD(gang_all_gatherv(g, A, 4, B, NULL, p, GANG_INT64, NULL), "recv_counts");
  BAD(gang_gather(g, NULL, B, 4, GANG_INT64, rank, NULL), "send");
  BAD(gang_gather(g, A, NULL, 4, GANG_INT64, rank, NULL), "recv");
  BAD(gang_scatter(g, NULL, B, 4, GANG_INT64, rank, NULL), "send");
  BAD(gang_scatter(g, A, NULL, 4, GANG_INT64, rank, NULL), "recv");
  BAD(gang_reduce_scatter(g, NULL, B, 4, GANG_INT64, GANG_SUM, NULL), "send");
  BAD(gang_reduce_scatter(g, A, NULL, 4, GANG_INT64, GANG_SUM, NULL), "recv");
  BAD(gang_reduce_scatterv(g, NULL, B, counts, p, GANG_INT64, GANG_SUM, NULL), "send");
  BAD(gang_reduce_scatterv(g, A, NULL, counts, p, GANG_INT64, GANG_SUM, NULL), "recv");
  BAD(gang_reduce_scatterv(g, A, B, NULL, p, GANG_INT64, GANG_SUM, NULL), "recv_counts");
  BAD(gang_all_to_all(g, NULL, B, 4, GANG_INT64, NULL), "send");
  BAD(gang_all_to_all(g, A, NULL, 4, GANG_INT64, NULL), "recv");
  BAD(gang_all_to_allv(g, NULL, counts, p, B, counts, p, GANG_INT64, NULL), "send");
  BAD(gang_all_to_allv(g, A, counts, p, NULL, counts, p, GANG_INT64, NULL), "recv");
  BAD(gang_all_to_allv(g, A, NULL, p, B, counts, p, GANG_INT64, NULL), "send_counts");
  BAD(gang_all_to_allv(g, A, counts, p, B, NULL, p, GANG_INT64, NULL), "recv_counts");
  BAD(gang_send(g, NULL, 4, GANG_INT64, peer, 0, NULL), "buf");
  BAD(gang_recv(g, NULL, 4, GANG_INT64, peer, 0, NULL), "buf");
  BAD(gang_broadcast_bytes(g, NULL, 5, rank, &out, &n), "data");
  BAD(gang_broadcast_bytes(g, A, 5, 0, NULL, &n), "out");
  BAD(gang_broadcast_bytes(g, A, 5, 0, &out, NULL), "out_len");
  BAD(gang_all_gather_bytes(g, NULL, 5, &out, lens, p), "data");
  BAD(gang_all_gather_bytes(g, A, 5, NULL, lens, p), "out");
  BAD(gang_all_gather_bytes(g, A, 5, &out, NULL, p), "lens");
  BAD(gang_send_bytes(g, NULL, 3, peer, 0), "data");
  BAD(gang_recv_bytes(g, peer, 0, NULL, &n), "out");
  BAD(gang_recv_bytes(g, peer, 0, &out, NULL), "out_len");
  BAD(gang_get_async_error(g, NULL), "out");

  /* Counts that overflow the address space. */
  BAD(gang_all_reduce(g, A, B, SIZE_MAX, GANG_INT64, GANG_SUM, NULL), "count");
  BAD(gang_all_reduce(g, A, B, SIZE_MAX / 4, GANG_INT64, GANG_SUM, NULL), "count");
  BAD(gang_reduce(g, A, B, SIZE_MAX, GANG_INT64, GANG_SUM, 0, NULL), "count");
  BAD(gang_broadcast(g, A, SIZE_MAX, GANG_FLOAT16, 0, NULL), "count");
  BAD(gang_all_gather(g, A, B, SIZE_MAX / 2 + 1, GANG_UINT8, NULL), "count");
  BAD(gang_gather(g, A, B, SIZE_MAX, GANG_INT32, 0, NULL), "count");
  BAD(gang_scatter(g, A, B, SIZE_MAX / 2 + 1, GANG_UINT8, 0, NULL), "count");
  BAD(gang_reduce_scatter(g, A, B, SIZE_MAX, GANG_INT8, GANG_SUM, NULL), "count");
  BAD(gang_all_to_all(g, A, B, SIZE_MAX, GANG_INT8, NULL), "count");
  BAD(gang_send(g, A, SIZE_MAX, GANG_INT64, peer, 0, NULL), "count");
  BAD(gang_recv(g, A, SIZE_MAX, GANG_INT64, peer, 0, NULL), "count");
  big[rank] = 4;
  BAD(gang_all_gatherv(g, A, 4, B, big, p, GANG_INT64, NULL), "recv_counts");
  BAD(gang_reduce_scatterv(g, A, B, big, p, GANG_INT64, GANG_SUM, NULL), "recv_counts");
  BAD(gang_all_to_allv(g, A, big, p, B, counts, p, GANG_INT64, NULL), "send_counts");
  BAD(gang_all_to_allv(g, A, counts, p, B, big, p, GANG_INT64, NULL), "recv_counts");

  /* dtype and op out of range. */
  BAD(gang_all_reduce(g, A, B, 4, BADDT, GANG_SUM, NULL), "dtype");
  BAD(gang_all_reduce(g, A, B, 4, (gang_dtype_t)-1, GANG_SUM, NULL), "dtype");
  BAD(gang_all_reduce(g, A, B, 4, GANG_DTYPE_FORCE_32BIT, GANG_SUM, NULL), "dtype");
  BAD(gang_reduce(g, A, B, 4, BADDT, GANG_SUM, 0, NULL), "dtype");
  BAD(gang_broadcast(g, A, 4, BADDT, 0, NULL), "dtype");
  BAD(gang_all_gather(g, A, B, 4, BADDT, NULL), "dtype");
  BAD(gang_all_gatherv(g, A, 4, B, counts, p, BADDT, NULL), "dtype");
  BAD(gang_gather(g, A, B, 4, BADDT, 0, NULL), "dtype");
  BAD(gang_scatter(g, A, B, 4, BADDT, 0, NULL), "dtype");
  BAD(gang_reduce_scatter(g, A, B, 4, BADDT, GANG_SUM, NULL), "dtype");
  BAD(gang_reduce_scatterv(g, A, B, counts, p, BADDT, GANG_SUM, NULL), "dtype");
  BAD(gang_all_to_all(g, A, B, 4, BADDT, NULL), "dtype");
  BAD(gang_all_to_allv(g, A, counts, p, B, counts, p, BADDT, NULL), "dtype");
  BAD(gang_send(g, A, 4, BADDT, peer, 0, NULL), "dtype");
  BAD(gang_recv(g, A, 4, BADDT, peer, 0, NULL), "dtype");
  BAD(gang_all_reduce(g, A, B, 4, GANG_INT64, BADOP, NULL), "op");
  BAD(gang_all_reduce(g, A, B, 4, GANG_INT64, (gang_op_t)-1, NULL), "op");
  BAD(gang_reduce(g, A, B, 4, GANG_INT64, BADOP, 0, NULL), "op");
  BAD(gang_reduce_scatter(g, A, B, 4, GANG_INT64, BADOP, NULL), "op");
  BAD(gang_reduce_scatterv(g, A, B, counts, p, GANG_INT64, BADOP, NULL), "op");
  TRUE_OR_COUNT(gang_supports(g, GANG_SUM, BADDT) == 0, "gang_supports with a bad dtype");
  TRUE_OR_COUNT(gang_supports(g, BADOP, GANG_INT8) == 0, "gang_supports with a bad op");
  TRUE_OR_COUNT(gang_dtype_size(BADDT) == 0, "gang_dtype_size(42)");
  TRUE_OR_COUNT(gang_dtype_size((gang_dtype_t)-1) == 0, "gang_dtype_size(-1)");

  /* root and peer out of range, peer == own rank, negative tag. */
  BAD(gang_reduce(g, A, B, 4, GANG_INT64, GANG_SUM, size, NULL), "root");
  BAD(gang_reduce(g, A, B, 4, GANG_INT64, GANG_SUM, -1, NULL), "root");
  BAD(gang_broadcast(g, A, 4, GANG_INT64, size, NULL), "root");
  BAD(gang_broadcast(g, A, 4, GANG_INT64, -1, NULL), "root");
  BAD(gang_gather(g, A, B, 4, GANG_INT64, size + 5, NULL), "root");
  BAD(gang_scatter(g, A, B, 4, GANG_INT64, -3, NULL), "root");
  BAD(gang_broadcast_bytes(g, A, 8, size, &out, &n), "root");
  {
    int flag = 0;
    BAD(gang_broadcast_flag(g, 1, size, &flag), "root");
    BAD(gang_broadcast_flag(g, 1, -1, &flag), "root");
  }
  BAD(gang_send(g, A, 4, GANG_INT64, size, 0, NULL), "peer");
  BAD(gang_send(g, A, 4, GANG_INT64, -1, 0, NULL), "peer");
  BAD(gang_recv(g, A, 4, GANG_INT64, size, 0, NULL), "peer");
  BAD(gang_recv(g, A, 4, GANG_INT64, -1, 0, NULL), "peer");
  BAD(gang_send(g, A, 4, GANG_INT64, rank, 0, NULL), "peer");
  BAD(gang_recv(g, A, 4, GANG_INT64, rank, 0, NULL), "peer");
  BAD(gang_send_bytes(g, A, 8, rank, 0), "peer");
  BAD(gang_recv_bytes(g, rank, 0, &out, &n), "peer");
  BAD(gang_send_bytes(g, A, 8, size, 0), "peer");
  BAD(gang_recv_bytes(g, -1, 0, &out, &n), "peer");
  BAD(gang_send(g, A, 4, GANG_INT64, peer, -1, NULL), "tag");
  BAD(gang_recv(g, A, 4, GANG_INT64, peer, -7, NULL), "tag");
  BAD(gang_send_bytes(g, A, 8, peer, -1), "tag");
  BAD(gang_recv_bytes(g, peer, -1, &out, &n), "tag");

  /* Overlapping buffers that are not the in-place form. */
  BAD(gang_all_reduce(g, A, A + 1, 4, GANG_INT64, GANG_SUM, NULL), "overlap");
  BAD(gang_all_reduce(g, A + 3, A, 4, GANG_INT64, GANG_SUM, NULL), "overlap");
  BAD(gang_reduce(g, A + 1, A, 4, GANG_INT64, GANG_SUM, rank, NULL), "overlap");
  BAD(gang_all_gather(g, A + off + 1, A, 4, GANG_INT64, NULL), "overlap");
  if (rank != 0) BAD(gang_all_gather(g, A, A, 4, GANG_INT64, NULL), "overlap");
  BAD(gang_all_gatherv(g, A + off + 2, 4, A, counts, p, GANG_INT64, NULL), "overlap");
  BAD(gang_gather(g, A + off + 1, A, 4, GANG_INT64, rank, NULL), "overlap");
  BAD(gang_scatter(g, A, A + off + 1, 4, GANG_INT64, rank, NULL), "overlap");
  BAD(gang_reduce_scatter(g, A, A + off + 1, 4, GANG_INT64, GANG_SUM, NULL), "overlap");
  BAD(gang_reduce_scatterv(g, A, A + off + 3, counts, p, GANG_INT64, GANG_SUM, NULL), "overlap");
  BAD(gang_all_to_all(g, A, A, 4, GANG_INT64, NULL), "overlap");
  BAD(gang_all_to_all(g, A, A + 1, 4, GANG_INT64, NULL), "overlap");
  BAD(gang_all_to_allv(g, A, counts, p, A, counts, p, GANG_INT64, NULL), "overlap");

  /* Count arrays whose length is not the gang size. */
  BAD(gang_all_gatherv(g, A, 4, B, counts, p - 1, GANG_INT64, NULL), "recv_counts");
  BAD(gang_all_gatherv(g, A, 4, B, counts, p + 1, GANG_INT64, NULL), "recv_counts");
  BAD(gang_all_gatherv(g, A, 3, B, counts, p, GANG_INT64, NULL), "send_count");
  BAD(gang_reduce_scatterv(g, A, B, counts, p + 1, GANG_INT64, GANG_SUM, NULL), "recv_counts");
  BAD(gang_reduce_scatterv(g, A, B, counts, 0, GANG_INT64, GANG_SUM, NULL), "recv_counts");
  BAD(gang_all_to_allv(g, A, counts, p - 1, B, counts, p, GANG_INT64, NULL), "send_counts");
  BAD(gang_all_to_allv(g, A, counts, p, B, counts, p + 1, GANG_INT64, NULL), "recv_counts");
  BAD(gang_all_gather_bytes(g, A, 5, &out, lens, p + 1), "nlens");
  BAD(gang_all_gather_bytes(g, A, 5, &out, lens, p - 1), "nlens");

  /* Gang management. */
  BAD(gang_set_timeout(g, 0), "timeout_ms");
  BAD(gang_set_timeout(g, -5), "timeout_ms");
  BAD(gang_set_cuda_stream(NULL, NULL), "gang");
  EXPECT(gang_set_cuda_stream(g, (void*)&nfail), GANG_ERR_UNSUPPORTED, "NULL stream");
  EXPECT(gang_set_cuda_stream(g, NULL), GANG_OK, "");
  BAD(gang_set_cuda_completion(NULL, GANG_CUDA_COMPLETION_STREAM), "gang");
  EXPECT(gang_set_cuda_completion(g, (gang_cuda_completion_t)-1), GANG_ERR_INVALID_ARGUMENT, "mode");
  EXPECT(gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_STREAM), GANG_OK, "");
  EXPECT(gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_HOST), GANG_OK, "");
  BAD(gang_shrink(NULL, 0, &sub), "gang");
  BAD(gang_shrink(g, 0, NULL), "out");
  {
    gangs_t* gangs = NULL;
    gang_parallel_config_t pc;
    gang_parallel_config_init(&pc);
    BAD(gangs_split_after_loss(g, NULL, &pc, &gangs), "shrunk");
    BAD(gangs_split_after_loss(g, g, NULL, &gangs), "config");
    BAD(gangs_split_after_loss(g, g, &pc, NULL), "out");
  }
  BAD(gang_split(g, -2, 0, &sub), "color");
  BAD(gang_split(g, 0, 0, NULL), "out");
  BAD(gang_create_subgang(g, dup, 2, &sub), "ranks");
  BAD(gang_create_subgang(g, dup, 0, &sub), "n 0");
  BAD(gang_create_subgang(g, NULL, 1, &sub), "ranks");
  BAD(gang_create_subgang(g, dup, 1, NULL), "out");
  BAD(gang_group_end(g, NULL), "group");
  EXPECT(gang_group_start(g), GANG_OK, "");
  BAD(gang_group_start(g), "group");
  BAD(gang_all_reduce(g, A, B, 1, GANG_INT64, GANG_SUM, &w), "work");
  EXPECT(gang_group_end(g, NULL), GANG_OK, "");
  TRUE_OR_COUNT(gang_root_rank(g, size) == -1 && gang_root_rank(g, -1) == -1,
                "gang_root_rank out of range");
  return nfail;
}

/* The gang still works: an all-reduce of rank+1. */
static int usable(gang_t* g, int rank, int size, int fake) {
  int64_t x = rank + 1, y = 0;
  const int64_t want = fake ? (int64_t)(rank + 1) * size : (int64_t)size * (size + 1) / 2;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == want, "all_reduce after bad calls gave %lld, expected %lld", (long long)y,
        (long long)want);
  return 0;
}

/* ---- fake gangs ---------------------------------------------------------------------- */

static void test_null_handles(void** s) {
  (void)s;
  assert_int_equal(null_handles(), 0);
}

static void test_battery_fake(void** s) {
  gang_t* g = NULL;
  int rank;
  (void)s;
  for (rank = 0; rank < 4; ++rank) {
    assert_int_equal(gang_create_fake(rank, 4, &g), GANG_OK);
    assert_int_equal(battery(g, rank, 4), 0);
    assert_int_equal(usable(g, rank, 4, 1), 0);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
  assert_int_equal(gang_create_fake(0, 2, &g), GANG_OK);
  assert_int_equal(battery(g, 0, 2), 0);
  assert_int_equal(usable(g, 0, 2, 1), 0);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

static void test_work_bad_input(void** s) {
  gang_t* g = NULL;
  gang_work_t* w = NULL;
  int64_t x = 1, y = 0;
  int nfail = 0;
  (void)s;
  assert_int_equal(gang_create_fake(0, 2, &g), GANG_OK);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w), GANG_OK);
  assert_non_null(w);
  BAD(gang_work_wait(w, -2), "timeout_ms");
  EXPECT(gang_work_wait(w, -1), GANG_OK, "");
  EXPECT(gang_work_test(w), GANG_OK, "");
  assert_int_equal(gang_work_destroy(w), GANG_OK);
  assert_int_equal(y, 2);
  /* A work outlives its gang. */
  w = NULL;
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w), GANG_OK);
  assert_int_equal(gang_destroy(g), GANG_OK);
  assert_int_equal(gang_work_wait(w, -1), GANG_OK);
  assert_int_equal(gang_work_destroy(w), GANG_OK);
  assert_int_equal(nfail, 0);
}

static void test_create_fake_bad_input(void** s) {
  gang_t* g = (gang_t*)&g;
  int nfail = 0;
  (void)s;
  BAD(gang_create_fake(0, 0, &g), "size");
  TRUE_OR_COUNT(g == NULL, "*out not NULL after a failure");
  BAD(gang_create_fake(4, 4, &g), "rank");
  BAD(gang_create_fake(-1, 4, &g), "rank");
  BAD(gang_create_fake(0, -3, &g), "size");
  BAD(gang_create_fake(0, 1, NULL), "out");
  {
    /* Refused before anything is sized by it: at once, not after
     * allocating gigabytes. */
    const int64_t t0 = gang_test_now_ms();
    BAD(gang_create_fake(0, INT_MAX, &g), "size");
    TRUE_OR_COUNT(gang_test_now_ms() - t0 < 1000, "gang_create_fake(0, INT_MAX) took %lld ms",
                  (long long)(gang_test_now_ms() - t0));
  }
  assert_int_equal(nfail, 0);
}

/* A layout of INT_MAX ranks: a capacity too small is refused before the
 * group is listed. */
static void test_layout_huge(void** s) {
  gang_parallel_config_t c = gang_test_parallel_config((gang_test_degrees_t){0});
  int ranks[4];
  size_t n = 0;
  int nfail = 0;
  const int64_t t0 = gang_test_now_ms();
  (void)s;
  BAD(gang_layout_ranks(INT_MAX, &c, GANG_AXIS_DP, 0, ranks, 4, &n), "capacity");
  TRUE_OR_COUNT(n == (size_t)INT_MAX, "n is %zu, not the group's size", n);
  TRUE_OR_COUNT(gang_test_now_ms() - t0 < 1000, "gang_layout_ranks(INT_MAX) took %lld ms",
                (long long)(gang_test_now_ms() - t0));
  assert_int_equal(nfail, 0);
}

/* ---- options ------------------------------------------------------------------------- */

typedef struct grown_options {
  gang_options_t o;
  uint64_t later_field;
} grown_options_t;

static void base_options(gang_options_t* o) {
  gang_options_init(o);
  o->backend = "fake";
  o->rank = 0;
  o->size = 2;
}

static void test_options_bad_input(void** s) {
  gang_options_t o;
  grown_options_t grown;
  gang_t* g = (gang_t*)&g;
  int nfail = 0;
  (void)s;
  unsetenv("GANG_INIT_METHOD");
  unsetenv("GANG_RANK");
  unsetenv("GANG_SIZE");

  /* The initializer and gang_options_init agree; the struct has no padding. */
  {
    const gang_options_t init = GANG_OPTIONS_INITIALIZER;
    gang_options_init(&o);
    TRUE_OR_COUNT(memcmp(&init, &o, sizeof o) == 0,
                  "GANG_OPTIONS_INITIALIZER differs from gang_options_init");
    TRUE_OR_COUNT(o.struct_size == sizeof o, "struct_size %zu", o.struct_size);
    TRUE_OR_COUNT(o.rank == -1 && o.size == -1 && o.device_index == -1 &&
                      o.backend == NULL && o.store == NULL && o.timeout_ms == 0,
                  "defaults");
    TRUE_OR_COUNT(sizeof(gang_options_t) % 8 == 0, "sizeof(gang_options_t) %zu",
                  sizeof(gang_options_t));
  }
  /* Too small a struct_size: init leaves it alone, create refuses it. */
  memset(&o, 0x11, sizeof o);
  gang_options_init_v(&o, 8);
  TRUE_OR_COUNT(o.struct_size == 0x1111111111111111ull,
                "gang_options_init_v with a too small struct_size wrote to it");
  gang_options_init_v(NULL, sizeof o); /* no crash */

  base_options(&o);
  o.struct_size = 8;
  BAD(gang_create(&o, &g), "struct_size");
  TRUE_OR_COUNT(g == NULL, "*out not NULL after a failure");
  base_options(&o);
  o.struct_size = sizeof o - 8;
  BAD(gang_create(&o, &g), "struct_size");

  /* A caller built against a newer gang: zero trailing bytes are fine,
   * nonzero ones are UNSUPPORTED. */
  memset(&grown, 0, sizeof grown);
  gang_options_init_v(&grown.o, sizeof grown);
  TRUE_OR_COUNT(grown.o.struct_size == sizeof grown, "grown struct_size");
  grown.o.backend = "fake";
  grown.o.rank = 1;
  grown.o.size = 2;
  EXPECT(gang_create(&grown.o, &g), GANG_OK, "");
  TRUE_OR_COUNT(gang_rank(g) == 1 && gang_size(g) == 2, "grown options ignored");
  gang_destroy(g);
  grown.later_field = 1;
  EXPECT(gang_create(&grown.o, &g), GANG_ERR_UNSUPPORTED, "offset");
  grown.later_field = (uint64_t)1 << 63;
  EXPECT(gang_create(&grown.o, &g), GANG_ERR_UNSUPPORTED, "");

  /* Backends. */
  base_options(&o);
  o.backend = "nosuch";
  BAD(gang_create(&o, &g), "backend");
  TRUE_OR_COUNT(strstr(gang_last_error(), "nosuch") != NULL, "message does not quote the name");
  base_options(&o);
  o.backend = "";
  o.rank = 0;
  o.size = 1;
  EXPECT(gang_create(&o, &g), GANG_OK, ""); /* "" is auto: shm, one rank on one host */
  TRUE_OR_COUNT(strcmp(gang_backend_name(g), "shm") == 0, "auto picked %s",
                gang_backend_name(g));
  gang_destroy(g);
  base_options(&o);
  o.backend = "auto";
  o.device_type = GANG_DEVICE_CUDA;
  o.size = 1;
  EXPECT(gang_create(&o, &g), GANG_ERR_UNAVAILABLE, "");

  /* Ranks, sizes and the rest. */
  base_options(&o);
  o.rank = 2;
  BAD(gang_create(&o, &g), "rank");
  base_options(&o);
  o.rank = -5;
  BAD(gang_create(&o, &g), "rank");
  base_options(&o);
  o.size = 0;
  o.rank = 0;
  BAD(gang_create(&o, &g), "size");
  base_options(&o);
  o.rank = -1; /* only one of rank and size */
  BAD(gang_create(&o, &g), "rank");
  base_options(&o);
  o.reserved0 = 1;
  BAD(gang_create(&o, &g), "reserved0");
  base_options(&o);
  o.device_type = 7;
  BAD(gang_create(&o, &g), "device_type");
  base_options(&o);
  o.debug = 5;
  BAD(gang_create(&o, &g), "debug");
  base_options(&o);
  o.name = "has space";
  BAD(gang_create(&o, &g), "name");
  base_options(&o);
  BAD(gang_create(NULL, &g), "options");
  BAD(gang_create(&o, NULL), "out");
  /* A Gloo gang of 2 with no rendezvous at all. */
  base_options(&o);
  o.backend = "gloo";
  BAD(gang_create(&o, &g), "init_method");
  /* A malformed init_method. */
  o.init_method = "carrier-pigeon://home";
  BAD(gang_create(&o, &g), "carrier-pigeon");
  TRUE_OR_COUNT(g == NULL, "*out not NULL after a failure");
  assert_int_equal(nfail, 0);
}

/* ---- stores --------------------------------------------------------------------------- */

static void test_store_bad_input(void** s) {
  gang_store_t* st = (gang_store_t*)&st;
  gang_store_t* mem = NULL;
  void* v = NULL;
  size_t n = 0;
  int64_t out = 0;
  const char* keys[2] = {"a", NULL};
  int nfail = 0;
  (void)s;
  BAD(gang_store_create(NULL, 0, 1000, &st), "url");
  TRUE_OR_COUNT(st == NULL, "*out not NULL after a failure");
  BAD(gang_store_create("memory://x", 0, 1000, NULL), "out");
  BAD(gang_store_create("http://example.com:80", 0, 1000, &st), "http");
  BAD(gang_store_create("tcp://127.0.0.1", 1, 1000, &st), "port");
  BAD(gang_store_create("tcp://127.0.0.1:99999", 1, 1000, &st), "port");
  BAD(gang_store_create("tcp://127.0.0.1:0", 0, 1000, &st), "port");
  BAD(gang_store_create("file://relative/dir", 0, 1000, &st), "file");
  BAD(gang_store_create("memory://", 0, 1000, &st), "name");

  BAD(gang_store_set(NULL, "k", "v", 1), "store");
  BAD(gang_store_get(NULL, "k", &v, &n), "store");
  BAD(gang_store_add(NULL, "k", 1, &out), "store");
  BAD(gang_store_wait(NULL, keys, 1), "store");
  BAD(gang_store_delete(NULL, "k"), "store");

  assert_int_equal(gang_store_create("memory://bad_input", 0, 500, &mem), GANG_OK);
  TRUE_OR_COUNT(gang_store_port(mem) == -1, "gang_store_port of a memory store");
  BAD(gang_store_set(mem, NULL, "v", 1), "key");
  BAD(gang_store_set(mem, "", "v", 1), "key");
  BAD(gang_store_set(mem, "k", NULL, 1), "value");
  EXPECT(gang_store_set(mem, "k", NULL, 0), GANG_OK, "");
  BAD(gang_store_get(mem, NULL, &v, &n), "key");
  BAD(gang_store_get(mem, "k", NULL, &n), "value");
  BAD(gang_store_get(mem, "k", &v, NULL), "n");
  BAD(gang_store_add(mem, NULL, 1, &out), "key");
  BAD(gang_store_wait(mem, NULL, 1), "keys");
  BAD(gang_store_wait(mem, keys, 2), "keys");
  EXPECT(gang_store_wait(mem, keys, 0), GANG_OK, "");
  BAD(gang_store_delete(mem, NULL), "key");
  {
    char longkey[5000];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    BAD(gang_store_set(mem, longkey, "v", 1), "key");
  }
  /* add on a value that is not an integer */
  EXPECT(gang_store_set(mem, "text", "hello", 5), GANG_OK, "");
  {
    const gang_status_t st2 = gang_store_add(mem, "text", 1, &out);
    TRUE_OR_COUNT(st2 != GANG_OK, "add on \"hello\" succeeded");
  }
  /* The store still works. */
  EXPECT(gang_store_add(mem, "counter", 5, &out), GANG_OK, "");
  TRUE_OR_COUNT(out == 5, "add gave %lld", (long long)out);
  assert_int_equal(gang_store_destroy(mem), GANG_OK);
  assert_int_equal(nfail, 0);
}

/* ---- status, errors, versions, dtypes ------------------------------------------------------ */

static void test_status_names(void** s) {
  (void)s;
#define CHECK_STATUS_NAME(name, value, msg)                          \
  assert_int_equal((int)name, value);                                \
  assert_string_equal(gang_status_name(name), #name);                \
  assert_string_equal(gang_status_string(name), msg);
  GANG_STATUS_MAP(CHECK_STATUS_NAME)
#undef CHECK_STATUS_NAME
  assert_string_equal(gang_status_name((gang_status_t)-12), "GANG_STATUS_UNKNOWN");
  assert_string_equal(gang_status_name((gang_status_t)2), "GANG_STATUS_UNKNOWN");
  assert_string_equal(gang_status_name((gang_status_t)12345), "GANG_STATUS_UNKNOWN");
  assert_non_null(gang_status_string((gang_status_t)-12));
  assert_non_null(gang_status_string(GANG_STATUS_FORCE_32BIT));
  assert_true(strlen(gang_status_string((gang_status_t)99)) > 0);
}

static void* thread_last_error(void* p) {
  *(int*)p = strcmp(gang_last_error(), "") == 0;
  return NULL;
}

static void test_last_error(void** s) {
  char buf[64];
  size_t full;
  gang_t* g = NULL;
  int64_t x = 1, y = 0;
  pthread_t th;
  int fresh = 0;
  (void)s;
  assert_int_equal(gang_create_fake(0, 7, &g), GANG_OK);
  assert_int_equal(gang_broadcast(g, &x, 1, GANG_INT64, 7, NULL), GANG_ERR_INVALID_ARGUMENT);
  full = strlen(gang_last_error());
  assert_true(full > 10);
  assert_non_null(strstr(gang_last_error(), "root 7"));
  assert_non_null(strstr(gang_last_error(), "gang_broadcast"));

  /* Truncation: at most len-1 bytes and a NUL; the full length back. */
  memset(buf, 'X', sizeof buf);
  assert_int_equal(gang_last_error_copy(buf, 5), full);
  assert_int_equal(buf[4], '\0');
  assert_memory_equal(buf, gang_last_error(), 4);
  assert_int_equal(buf[5], 'X');
  memset(buf, 'X', sizeof buf);
  assert_int_equal(gang_last_error_copy(buf, 1), full);
  assert_int_equal(buf[0], '\0');
  assert_int_equal(buf[1], 'X');
  memset(buf, 'X', sizeof buf);
  assert_int_equal(gang_last_error_copy(buf, 0), full);
  assert_int_equal(buf[0], 'X');
  assert_int_equal(gang_last_error_copy(NULL, 0), full);
  {
    char* whole = (char*)malloc(full + 1);
    assert_non_null(whole);
    assert_int_equal(gang_last_error_copy(whole, full + 1), full);
    assert_string_equal(whole, gang_last_error());
    free(whole);
  }

  /* Successful calls leave it. */
  strcpy(buf, "");
  gang_last_error_copy(buf, sizeof buf);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_OK);
  assert_int_equal(gang_rank(g), 0);
  assert_memory_equal(buf, gang_last_error(), strlen(buf));

  /* It belongs to the thread. */
  assert_int_equal(pthread_create(&th, NULL, thread_last_error, &fresh), 0);
  pthread_join(th, NULL);
  assert_true(fresh);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

static void test_versions(void** s) {
  char want[64];
  (void)s;
  assert_int_equal(gang_version_number(), GANG_VERSION_NUMBER);
  assert_int_equal(GANG_VERSION_NUMBER, GANG_VERSION_MAJOR * 10000 +
                                            GANG_VERSION_MINOR * 100 + GANG_VERSION_PATCH);
  snprintf(want, sizeof want, "%d.%d.%d", GANG_VERSION_MAJOR, GANG_VERSION_MINOR,
           GANG_VERSION_PATCH);
  assert_string_equal(GANG_VERSION_STRING, want);
  assert_string_equal(gang_version_string(), GANG_VERSION_STRING);
}

static void test_dtype_sizes(void** s) {
  int d;
  (void)s;
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    assert_int_equal(gang_dtype_size(ref_dtypes[d]), ref_dtype_size(ref_dtypes[d]));
  }
  assert_int_equal(gang_dtype_size(GANG_INT8), 1);
  assert_int_equal(gang_dtype_size(GANG_FLOAT16), 2);
  assert_int_equal(gang_dtype_size(GANG_BFLOAT16), 2);
  assert_int_equal(gang_dtype_size(GANG_FLOAT64), 8);
  assert_int_equal(gang_dtype_size(GANG_BOOL), 1);
  assert_int_equal(gang_dtype_size(GANG_INT16), 2);
  assert_int_equal(gang_dtype_size((gang_dtype_t)12), 0);
  assert_int_equal(gang_dtype_size(GANG_DTYPE_FORCE_32BIT), 0);
  /* The enum values are the contract. */
  assert_int_equal(GANG_INT8, 0);
  assert_int_equal(GANG_UINT64, 5);
  assert_int_equal(GANG_FLOAT64, 9);
  assert_int_equal(GANG_BOOL, 10);
  assert_int_equal(GANG_INT16, 11);
  assert_int_equal(GANG_AVG, 4);
  assert_int_equal(GANG_DEVICE_CUDA, 1);
  assert_int_equal(sizeof(gang_dtype_t), 4);
  assert_int_equal(sizeof(gang_status_t), 4);
}

/* ---- a 2-rank Gloo gang ---------------------------------------------------------------- */

/* One rank makes every bad call while the other goes straight on: bad
 * calls must use no sequence number and send nothing. */
static int rank_battery(gang_t* g, int rank, int size, void* arg) {
  int turn;
  (void)arg;
  for (turn = 0; turn < size; ++turn) {
    if (rank == turn) {
      const int nfail = battery(g, rank, size) + null_handles();
      CHECK(nfail == 0, "%d bad calls misbehaved", nfail);
    }
    if (usable(g, rank, size, 0)) return 1;
  }
  return 0;
}

static void test_battery_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_battery, NULL, 10000, 60), 0);
  assert_int_equal(gang_test_run_ranks(3, "gloo", rank_battery, NULL, 10000, 60), 0);
}

/* The helpers check their out-pointer before any traffic, like every
 * other call: one rank passes NULL, the other goes straight on. */
static int rank_helper_out_null(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  if (rank == 0) {
    int64_t t0 = gang_test_now_ms();
    CHECK_STATUS(gang_broadcast_flag(g, 1, 0, NULL), GANG_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gang_last_error(), "out") != NULL, "message does not name out");
    CHECK_STATUS(gang_all_sum(g, 1.0, NULL), GANG_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gang_last_error(), "out") != NULL, "message does not name out");
    CHECK(gang_test_now_ms() - t0 < 1000, "the refused calls took %lld ms",
          (long long)(gang_test_now_ms() - t0));
  }
  return usable(g, rank, size, 0);
}

static void test_helpers_out_null_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_helper_out_null, NULL, 3000, 30), 0);
}

/* A timeout of INT64_MAX - 1 ms (forever, to the caller) creates a gloo
 * gang that works, and so does gang_set_timeout(INT64_MAX). */
static int rank_huge_timeout(gang_t* g, int rank, int size, void* arg) {
  (void)arg;
  if (usable(g, rank, size, 0)) return 1;
  CHECK_OK(gang_set_timeout(g, INT64_MAX));
  CHECK(gang_get_timeout(g) > 0, "the timeout reads %lld", (long long)gang_get_timeout(g));
  return usable(g, rank, size, 0);
}

static void test_huge_timeout_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_huge_timeout, NULL, INT64_MAX - 1, 60), 0);
}

/* Lengths no buffer holds (SIZE_MAX) in the byte calls: every rank refuses
 * them alike, at once, and the gang goes on. */
static int rank_huge_lengths(gang_t* g, int rank, int size, void* arg) {
  static const char data[8] = "payload";
  void* out = NULL;
  size_t n = 0, lens[3];
  const int64_t t0 = gang_test_now_ms();
  (void)arg;
  CHECK_STATUS(gang_broadcast_bytes(g, data, rank == 0 ? SIZE_MAX : 0, 0, &out, &n),
               GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "len") != NULL, "message does not name len: %s",
        gang_last_error());
  CHECK(out == NULL, "an output after a refusal");
  if (usable(g, rank, size, 0)) return 1;
  CHECK_STATUS(gang_all_gather_bytes(g, data, rank == 1 ? SIZE_MAX : 4, &out, lens, 2),
               GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "rank 1's len") != NULL, "message does not name rank 1: %s",
        gang_last_error());
  if (usable(g, rank, size, 0)) return 1;
  if (rank == 0) {
    CHECK_STATUS(gang_send_bytes(g, data, SIZE_MAX, 1, 7), GANG_ERR_INVALID_ARGUMENT);
  } else {
    CHECK_STATUS(gang_recv_bytes(g, 0, 7, &out, &n), GANG_ERR_INVALID_ARGUMENT);
  }
  CHECK(strstr(gang_last_error(), "len") != NULL, "message does not name len: %s",
        gang_last_error());
  CHECK(gang_test_now_ms() - t0 < 3000, "the refusals took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  return usable(g, rank, size, 0);
}

static void test_huge_lengths_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_huge_lengths, NULL, 10000, 60), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_handles),
      cmocka_unit_test(test_battery_fake),
      cmocka_unit_test(test_work_bad_input),
      cmocka_unit_test(test_create_fake_bad_input),
      cmocka_unit_test(test_options_bad_input),
      cmocka_unit_test(test_store_bad_input),
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_last_error),
      cmocka_unit_test(test_versions),
      cmocka_unit_test(test_dtype_sizes),
      cmocka_unit_test(test_battery_gloo),
      cmocka_unit_test(test_helpers_out_null_gloo),
      cmocka_unit_test(test_layout_huge),
      cmocka_unit_test(test_huge_timeout_gloo),
      cmocka_unit_test(test_huge_lengths_gloo),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
