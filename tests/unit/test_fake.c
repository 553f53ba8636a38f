/*
 * test_fake.c - the fake gang (gang_create_fake), gang.h "Creating gangs": one
 * process standing in for rank `rank` of a `size`-rank gang in which every
 * rank holds this rank's data. No processes, no traffic.
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

#define COUNT 7

/* (rank, size) pairs every test runs over. */
static const int kShapes[][2] = {{0, 1}, {1, 3}, {3, 4}, {0, 2}, {2, 3}};
#define NSHAPES (sizeof kShapes / sizeof kShapes[0])

static gang_t* fake(int rank, int size) {
  gang_t* g = NULL;
  assert_int_equal(gang_create_fake(rank, size, &g), GANG_OK);
  assert_non_null(g);
  return g;
}

/* An input for which x op x op ... is exact in every dtype (so "x*size" and
 * "x^size" have one meaning), with wrap-around for integers. */
static uint64_t input(gang_dtype_t dt, gang_op_t op, size_t i) {
  if (!ref_dtype_is_float(dt)) {
    static const int64_t ints[COUNT] = {1, -3, 100, 127, -128, 0x7fffffff, -2};
    if (op == GANG_PROD && i == 3) return ref_from_int(dt, 0x4000000000000001ll);
    return ref_from_int(dt, ints[i] * (i == 5 ? 0x100000001ll : 1));
  }
  if (op == GANG_PROD) {
    static const double f[COUNT] = {1.5, 0.75, 2.0, -0.5, 3.0, -1.5, 1.0};
    return ref_from_double(dt, f[i]);
  }
  {
    static const double f[COUNT] = {0.125, -2.5, 3.375, 1.0, -0.875, 7.25, 0.0};
    return ref_from_double(dt, f[i]);
  }
}

/* op over `size` copies of x. */
static uint64_t over_copies(gang_dtype_t dt, gang_op_t op, uint64_t x, int size) {
  uint64_t acc = x;
  int k;
  if (op == GANG_AVG) return x; /* AVG gives x */
  for (k = 1; k < size; ++k) acc = ref_reduce(dt, op, acc, x);
  return acc;
}

static void expect_elems(const char* what, gang_dtype_t dt, const void* got,
                         const uint64_t* want, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) {
    const uint64_t a = ref_load(dt, got, i);
    if (a != want[i]) {
      char ga[64], wb[64];
      fail_msg("%s: element %zu is %s, expected %s", what, i,
               ref_format(dt, a, ga, sizeof ga), ref_format(dt, want[i], wb, sizeof wb));
    }
  }
}

/* ---- queries ----------------------------------------------------------------------- */

static void test_queries(void** s) {
  size_t k;
  (void)s;
  for (k = 0; k < NSHAPES; ++k) {
    const int rank = kShapes[k][0], size = kShapes[k][1];
    gang_t* g = fake(rank, size);
    int r, d, o;
    assert_int_equal(gang_rank(g), rank);
    assert_int_equal(gang_size(g), size);
    assert_string_equal(gang_backend_name(g), "fake");
    assert_string_equal(gang_name(g), "root");
    assert_int_equal(gang_device_type(g), GANG_DEVICE_CPU);
    assert_int_equal(gang_device_index(g), -1);
    assert_true(gang_get_timeout(g) > 0);
    for (r = 0; r < size; ++r) assert_int_equal(gang_root_rank(g, r), r);
    assert_int_equal(gang_root_rank(g, size), -1);
    assert_int_equal(gang_root_rank(g, -1), -1);
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      for (o = 0; o < REF_NUM_OPS; ++o) {
        assert_int_equal(gang_supports(g, ref_ops[o], ref_dtypes[d]),
                         ref_reducible(ref_dtypes[d], ref_ops[o]));
      }
    }
    {
      gang_status_t st = GANG_ERR_INTERNAL;
      assert_int_equal(gang_get_async_error(g, &st), GANG_OK);
      assert_int_equal(st, GANG_OK);
    }
    assert_int_equal(gang_set_timeout(g, 1234), GANG_OK);
    assert_int_equal(gang_get_timeout(g), 1234);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

/* gang_create with backend "fake" is gang_create_fake. */
static void test_create_with_options(void** s) {
  gang_options_t o;
  gang_t* g = NULL;
  int64_t x = 5, y = 0;
  (void)s;
  gang_options_init(&o);
  o.backend = "fake";
  o.rank = 2;
  o.size = 5;
  o.name = "pretend";
  o.timeout_ms = 4321;
  assert_int_equal(gang_create(&o, &g), GANG_OK);
  assert_int_equal(gang_rank(g), 2);
  assert_int_equal(gang_size(g), 5);
  assert_string_equal(gang_backend_name(g), "fake");
  assert_string_equal(gang_name(g), "pretend");
  assert_int_equal(gang_get_timeout(g), 4321);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_OK);
  assert_int_equal(y, 25);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

/* ---- reductions -------------------------------------------------------------------- */

static void test_all_reduce(void** s) {
  size_t k, i;
  int d, o, place;
  long cases = 0;
  (void)s;
  for (k = 0; k < NSHAPES; ++k) {
    const int rank = kShapes[k][0], size = kShapes[k][1];
    gang_t* g = fake(rank, size);
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      for (o = 0; o < REF_NUM_OPS; ++o) {
        const gang_op_t op = ref_ops[o];
        if (!ref_reducible(dt, op)) continue; /* checked with gang_supports above */
        for (place = 0; place < 2; ++place) {
          uint64_t send[COUNT], recv[COUNT], want[COUNT];
          char what[96];
          snprintf(what, sizeof what, "fake %d/%d all_reduce %s %s%s", rank, size,
                   ref_dtype_name(dt), ref_op_name(op), place ? " in place" : "");
          memset(recv, 0xA5, sizeof recv);
          for (i = 0; i < COUNT; ++i) {
            ref_store(dt, send, i, input(dt, op, i));
            want[i] = over_copies(dt, op, input(dt, op, i), size);
          }
          assert_int_equal(gang_all_reduce(g, send, place ? send : recv, COUNT, dt, op, NULL),
                           GANG_OK);
          expect_elems(what, dt, place ? send : recv, want, COUNT);
          /* reduce: the same at the root; recv may be NULL elsewhere. */
          for (i = 0; i < COUNT; ++i) ref_store(dt, send, i, input(dt, op, i));
          memset(recv, 0xA5, sizeof recv);
          assert_int_equal(gang_reduce(g, send, recv, COUNT, dt, op, rank, NULL), GANG_OK);
          expect_elems(what, dt, recv, want, COUNT);
          if (size > 1) {
            assert_int_equal(gang_reduce(g, send, NULL, COUNT, dt, op, (rank + 1) % size, NULL),
                             GANG_OK);
          }
          cases += 2;
        }
      }
      assert_int_equal(gang_all_reduce(g, NULL, NULL, 0, dt, GANG_SUM, NULL), GANG_OK);
    }
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
  /* The closed forms on one value. */
  {
    gang_t* g = fake(1, 4);
    int32_t x = 3, y = 0;
    float f = 1.5f, fy = 0;
    assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT32, GANG_SUM, NULL), GANG_OK);
    assert_int_equal(y, 12);
    assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT32, GANG_PROD, NULL), GANG_OK);
    assert_int_equal(y, 81);
    assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT32, GANG_MIN, NULL), GANG_OK);
    assert_int_equal(y, 3);
    /* No integer mean: refused as torch refuses it, never truncated. */
    assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT32, GANG_AVG, NULL),
                     GANG_ERR_UNSUPPORTED);
    assert_non_null(strstr(gang_last_error(), "GANG_SUM and divide"));
    assert_int_equal(gang_supports(g, GANG_AVG, GANG_INT32), 0);
    assert_int_equal(gang_all_reduce(g, &f, &fy, 1, GANG_FLOAT32, GANG_AVG, NULL), GANG_OK);
    assert_true(fy == 1.5f);
    assert_int_equal(gang_all_reduce(g, &f, &fy, 1, GANG_FLOAT32, GANG_PROD, NULL), GANG_OK);
    assert_true(fy == 5.0625f);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
  printf("fake all_reduce/reduce: %ld cases ok\n", cases);
}

static void test_reduce_scatter(void** s) {
  size_t k, i;
  int d, o, place, r;
  (void)s;
  for (k = 0; k < NSHAPES; ++k) {
    const int rank = kShapes[k][0], size = kShapes[k][1];
    const size_t p = (size_t)size;
    gang_t* g = fake(rank, size);
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      for (o = 0; o < REF_NUM_OPS; ++o) {
        const gang_op_t op = ref_ops[o];
        if (!ref_reducible(dt, op)) continue; /* checked with gang_supports above */
        for (place = 0; place < 2; ++place) {
          uint64_t send[4 * COUNT], recv[COUNT], want[COUNT];
          size_t counts[4], off = 0;
          char what[96];
          void* out;
          snprintf(what, sizeof what, "fake %d/%d reduce_scatter %s %s", rank, size,
                   ref_dtype_name(dt), ref_op_name(op));
          /* Chunk c, element j holds input(j + c): every chunk differs. */
          for (i = 0; i < p * COUNT; ++i) ref_store(dt, send, i, input(dt, op, (i + i / COUNT) % COUNT));
          for (i = 0; i < COUNT; ++i) {
            want[i] = over_copies(dt, op, input(dt, op, (i + (size_t)rank) % COUNT), size);
          }
          out = place ? (void*)((unsigned char*)send + (size_t)rank * COUNT * ref_dtype_size(dt))
                      : (void*)recv;
          assert_int_equal(gang_reduce_scatter(g, send, out, COUNT, dt, op, NULL), GANG_OK);
          expect_elems(what, dt, out, want, COUNT);

          /* reduce_scatterv: chunk r has r+1 elements. */
          snprintf(what, sizeof what, "fake %d/%d reduce_scatterv %s %s", rank, size,
                   ref_dtype_name(dt), ref_op_name(op));
          for (r = 0; r < size; ++r) {
            counts[r] = (size_t)r + 1;
            if (r < rank) off += counts[r];
          }
          for (i = 0; i < 4 * COUNT; ++i) ref_store(dt, send, i, input(dt, op, i % COUNT));
          for (i = 0; i < counts[rank]; ++i) {
            want[i] = over_copies(dt, op, input(dt, op, (off + i) % COUNT), size);
          }
          out = place ? (void*)((unsigned char*)send + off * ref_dtype_size(dt)) : (void*)recv;
          assert_int_equal(gang_reduce_scatterv(g, send, out, counts, p, dt, op, NULL), GANG_OK);
          expect_elems(what, dt, out, want, counts[rank]);
        }
      }
    }
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

/* ---- data movement ---------------------------------------------------------------------- */

static void test_data_movement(void** s) {
  size_t k, i;
  int d, r, place;
  (void)s;
  for (k = 0; k < NSHAPES; ++k) {
    const int rank = kShapes[k][0], size = kShapes[k][1];
    const size_t p = (size_t)size;
    gang_t* g = fake(rank, size);
    for (d = 0; d < REF_NUM_DTYPES; ++d) {
      const gang_dtype_t dt = ref_dtypes[d];
      const size_t es = ref_dtype_size(dt);
      uint64_t mine[COUNT], big[4 * COUNT], out[4 * COUNT + 1];
      size_t counts[4];
      for (i = 0; i < COUNT; ++i) ref_store(dt, mine, i, ref_from_int(dt, (int64_t)(i * 37 + 5)));
      for (i = 0; i < 4 * COUNT; ++i) ref_store(dt, big, i, ref_from_int(dt, (int64_t)(i * 11 + 1)));

      /* broadcast and barrier are no-ops, root or not. */
      for (r = 0; r < size; ++r) {
        memcpy(out, mine, sizeof mine);
        assert_int_equal(gang_broadcast(g, out, COUNT, dt, r, NULL), GANG_OK);
        assert_memory_equal(out, mine, COUNT * es);
      }
      assert_int_equal(gang_barrier(g, NULL), GANG_OK);

      /* all_gather and gather repeat the input. */
      for (place = 0; place < 2; ++place) {
        const void* src = mine;
        memset(out, 0xA5, sizeof out);
        if (place) {
          memcpy((unsigned char*)out + (size_t)rank * COUNT * es, mine, COUNT * es);
          src = (unsigned char*)out + (size_t)rank * COUNT * es;
        }
        assert_int_equal(gang_all_gather(g, src, out, COUNT, dt, NULL), GANG_OK);
        for (r = 0; r < size; ++r) {
          assert_memory_equal((unsigned char*)out + (size_t)r * COUNT * es, mine, COUNT * es);
        }
        memset(out, 0xA5, sizeof out);
        if (place) {
          memcpy((unsigned char*)out + (size_t)rank * COUNT * es, mine, COUNT * es);
          src = (unsigned char*)out + (size_t)rank * COUNT * es;
        }
        assert_int_equal(gang_gather(g, src, out, COUNT, dt, rank, NULL), GANG_OK);
        for (r = 0; r < size; ++r) {
          assert_memory_equal((unsigned char*)out + (size_t)r * COUNT * es, mine, COUNT * es);
        }
      }
      if (size > 1) { /* off root recv is ignored */
        assert_int_equal(gang_gather(g, mine, NULL, COUNT, dt, (rank + 1) % size, NULL), GANG_OK);
      }
      /* all_gatherv with every count equal to the input's. */
      for (r = 0; r < size; ++r) counts[r] = COUNT;
      memset(out, 0xA5, sizeof out);
      assert_int_equal(gang_all_gatherv(g, mine, COUNT, out, counts, p, dt, NULL), GANG_OK);
      for (r = 0; r < size; ++r) {
        assert_memory_equal((unsigned char*)out + (size_t)r * COUNT * es, mine, COUNT * es);
      }

      /* scatter returns chunk `rank`, at the root and elsewhere. */
      for (r = 0; r < size; ++r) {
        memset(out, 0xA5, sizeof out);
        assert_int_equal(gang_scatter(g, big, out, COUNT, dt, r, NULL), GANG_OK);
        assert_memory_equal(out, (unsigned char*)big + (size_t)rank * COUNT * es, COUNT * es);
      }
      /* in place at the root */
      memcpy(out, big, p * COUNT * es);
      assert_int_equal(gang_scatter(g, out, (unsigned char*)out + (size_t)rank * COUNT * es,
                                    COUNT, dt, rank, NULL), GANG_OK);
      assert_memory_equal((unsigned char*)out + (size_t)rank * COUNT * es,
                          (unsigned char*)big + (size_t)rank * COUNT * es, COUNT * es);
      /* send is required on every rank */
      if (size > 1) {
        assert_int_equal(gang_scatter(g, NULL, out, COUNT, dt, (rank + 1) % size, NULL),
                         GANG_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(gang_last_error(), "send"));
      }

      /* all_to_all: every peer sends this rank its chunk `rank`, and every
       * peer is this rank. */
      memset(out, 0xA5, sizeof out);
      assert_int_equal(gang_all_to_all(g, big, out, COUNT, dt, NULL), GANG_OK);
      for (r = 0; r < size; ++r) {
        assert_memory_equal((unsigned char*)out + (size_t)r * COUNT * es,
                            (unsigned char*)big + (size_t)rank * COUNT * es, COUNT * es);
      }
      /* all_to_allv: chunk p of the send has p+1 elements; every peer sends
       * its chunk `rank` (rank+1 elements). */
      {
        size_t sc[4], rc[4], soff = 0;
        for (r = 0; r < size; ++r) {
          sc[r] = (size_t)r + 1;
          rc[r] = (size_t)rank + 1;
          if (r < rank) soff += sc[r];
        }
        memset(out, 0xA5, sizeof out);
        assert_int_equal(gang_all_to_allv(g, big, sc, p, out, rc, p, dt, NULL), GANG_OK);
        for (r = 0; r < size; ++r) {
          assert_memory_equal((unsigned char*)out + (size_t)r * rc[r] * es,
                              (unsigned char*)big + soff * es, rc[r] * es);
        }
      }
      /* count 0 with NULL pointers */
      assert_int_equal(gang_all_gather(g, NULL, NULL, 0, dt, NULL), GANG_OK);
      assert_int_equal(gang_scatter(g, NULL, NULL, 0, dt, 0, NULL), GANG_OK);
      assert_int_equal(gang_all_to_all(g, NULL, NULL, 0, dt, NULL), GANG_OK);
      assert_int_equal(gang_broadcast(g, NULL, 0, dt, 0, NULL), GANG_OK);
    }
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

/* ---- bytes and helpers ------------------------------------------------------------------- */

static void test_bytes_and_helpers(void** s) {
  size_t k, i;
  int r;
  (void)s;
  for (k = 0; k < NSHAPES; ++k) {
    const int rank = kShapes[k][0], size = kShapes[k][1];
    gang_t* g = fake(rank, size);
    const char data[] = "fake gangs repeat what they are given";
    void* out = NULL;
    size_t out_len = 0, lens[4];
    int flag = -1;
    double sum = 0;

    /* broadcast_bytes at the root copies. */
    assert_int_equal(gang_broadcast_bytes(g, data, sizeof data, rank, &out, &out_len), GANG_OK);
    assert_int_equal(out_len, sizeof data);
    assert_non_null(out);
    assert_memory_equal(out, data, sizeof data);
    assert_ptr_not_equal(out, data);
    gang_free(out);
    /* zero bytes still give a pointer to free */
    out = NULL;
    assert_int_equal(gang_broadcast_bytes(g, NULL, 0, rank, &out, &out_len), GANG_OK);
    assert_int_equal(out_len, 0);
    gang_free(out);

    /* all_gather_bytes repeats. */
    for (i = 0; i < 4; ++i) lens[i] = 99;
    assert_int_equal(gang_all_gather_bytes(g, data, sizeof data, &out, lens, (size_t)size),
                     GANG_OK);
    for (r = 0; r < size; ++r) {
      assert_int_equal(lens[r], sizeof data);
      assert_memory_equal((char*)out + (size_t)r * sizeof data, data, sizeof data);
    }
    gang_free(out);
    assert_int_equal(gang_all_gather_bytes(g, NULL, 0, &out, lens, (size_t)size), GANG_OK);
    for (r = 0; r < size; ++r) assert_int_equal(lens[r], 0);
    gang_free(out);

    /* broadcast_flag at the root, all_sum. */
    assert_int_equal(gang_broadcast_flag(g, 42, rank, &flag), GANG_OK);
    assert_int_equal(flag, 1);
    assert_int_equal(gang_broadcast_flag(g, 0, rank, &flag), GANG_OK);
    assert_int_equal(flag, 0);
    assert_int_equal(gang_all_sum(g, 2.25, &sum), GANG_OK);
    assert_true(sum == 2.25 * size);

    /* send/recv and split are UNSUPPORTED. */
    if (size > 1) {
      const int peer = (rank + 1) % size;
      int32_t x = 1;
      gang_t* sub = (gang_t*)&sub;
      assert_int_equal(gang_send(g, &x, 1, GANG_INT32, peer, 0, NULL), GANG_ERR_UNSUPPORTED);
      assert_int_equal(gang_recv(g, &x, 1, GANG_INT32, peer, 0, NULL), GANG_ERR_UNSUPPORTED);
      assert_int_equal(gang_send_bytes(g, data, sizeof data, peer, 0), GANG_ERR_UNSUPPORTED);
      assert_int_equal(gang_recv_bytes(g, peer, 0, &out, &out_len), GANG_ERR_UNSUPPORTED);
      assert_int_equal(gang_split(g, 0, 0, &sub), GANG_ERR_UNSUPPORTED);
      assert_null(sub);
      /* and leave the gang usable */
      assert_int_equal(gang_all_sum(g, 1.0, &sum), GANG_OK);
      assert_true(sum == (double)size);
      {
        gang_status_t st = GANG_ERR_INTERNAL;
        assert_int_equal(gang_get_async_error(g, &st), GANG_OK);
        assert_int_equal(st, GANG_OK);
      }
    }
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

/* ---- sub-gangs, async, groups --------------------------------------------------------------- */

static void test_subgangs(void** s) {
  const int list[3] = {3, 0, 2};
  int rank;
  (void)s;
  for (rank = 0; rank < 5; ++rank) {
    gang_t* g = fake(rank, 5);
    gang_t* sub = (gang_t*)&sub;
    int pos = -1, i;
    for (i = 0; i < 3; ++i) {
      if (list[i] == rank) pos = i;
    }
    assert_int_equal(gang_create_subgang(g, list, 3, &sub), GANG_OK);
    if (pos < 0) {
      assert_null(sub);
    } else {
      gang_t* sub2 = (gang_t*)&sub2;
      const int list2[2] = {2, 0};
      int64_t x = 7, y = 0;
      assert_non_null(sub);
      assert_int_equal(gang_rank(sub), pos);
      assert_int_equal(gang_size(sub), 3);
      assert_string_equal(gang_backend_name(sub), "fake");
      for (i = 0; i < 3; ++i) assert_int_equal(gang_root_rank(sub, i), list[i]);
      assert_int_equal(gang_root_rank(sub, 3), -1);
      assert_non_null(strstr(gang_name(sub), "root/"));
      assert_int_equal(gang_all_reduce(sub, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_OK);
      assert_int_equal(y, 21);
      /* A sub-gang of the sub-gang maps root ranks through both. */
      assert_int_equal(gang_create_subgang(sub, list2, 2, &sub2), GANG_OK);
      if (pos == 2 || pos == 0) {
        assert_non_null(sub2);
        assert_int_equal(gang_size(sub2), 2);
        assert_int_equal(gang_rank(sub2), pos == 2 ? 0 : 1);
        assert_int_equal(gang_root_rank(sub2, 0), list[2]);
        assert_int_equal(gang_root_rank(sub2, 1), list[0]);
        /* the parent may go first */
        assert_int_equal(gang_destroy(sub), GANG_OK);
        sub = NULL;
        assert_int_equal(gang_all_reduce(sub2, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_OK);
        assert_int_equal(y, 14);
        assert_int_equal(gang_destroy(sub2), GANG_OK);
      } else {
        assert_null(sub2);
      }
    }
    assert_int_equal(gang_destroy(sub), GANG_OK);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

static void test_async_and_groups(void** s) {
  gang_t* g = fake(1, 3);
  gang_work_t* w[4];
  int64_t x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  int i;
  (void)s;
  for (i = 0; i < 4; ++i) {
    w[i] = NULL;
    assert_int_equal(gang_all_reduce(g, &x[i], &y[i], 1, GANG_INT64, GANG_SUM, &w[i]), GANG_OK);
    assert_non_null(w[i]);
  }
  for (i = 3; i >= 0; --i) {
    assert_int_equal(gang_work_wait(w[i], -1), GANG_OK);
    assert_int_equal(gang_work_test(w[i]), GANG_OK);
    assert_int_equal(gang_work_destroy(w[i]), GANG_OK);
    assert_int_equal(y[i], 3 * x[i]);
  }
  /* A group of collectives. */
  assert_int_equal(gang_group_start(g), GANG_OK);
  for (i = 0; i < 4; ++i) {
    y[i] = 0;
    assert_int_equal(gang_all_reduce(g, &x[i], &y[i], 1, GANG_INT64, GANG_PROD, NULL), GANG_OK);
  }
  assert_int_equal(gang_group_end(g, &w[0]), GANG_OK);
  if (w[0] != NULL) {
    assert_int_equal(gang_work_wait(w[0], -1), GANG_OK);
    assert_int_equal(gang_work_destroy(w[0]), GANG_OK);
  }
  for (i = 0; i < 4; ++i) assert_int_equal(y[i], x[i] * x[i] * x[i]);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

/* gang_abort on a fake gang fails later operations. */
static void test_abort(void** s) {
  gang_t* g = fake(0, 2);
  int64_t x = 1, y = 0;
  gang_status_t st = GANG_OK;
  (void)s;
  assert_int_equal(gang_abort(g), GANG_OK);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_ERR_ABORTED);
  assert_int_equal(gang_get_async_error(g, &st), GANG_OK);
  assert_int_equal(st, GANG_ERR_ABORTED);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_queries),
      cmocka_unit_test(test_create_with_options),
      cmocka_unit_test(test_all_reduce),
      cmocka_unit_test(test_reduce_scatter),
      cmocka_unit_test(test_data_movement),
      cmocka_unit_test(test_bytes_and_helpers),
      cmocka_unit_test(test_subgangs),
      cmocka_unit_test(test_async_and_groups),
      cmocka_unit_test(test_abort),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
