/*
 * test_nccl.c - the NCCL backend (libgang-nccl.so) through gang's C API, on
 * "device" buffers: run against the host double of the CUDA runtime and
 * NCCL (tests/nccl_double, put first by LD_LIBRARY_PATH; GANG_TEST_NCCL_DOUBLE
 * is then set) or, under `ctest -L gpu`, against the real libraries, where
 * every test skips, saying why, when no GPU is visible.
 *
 * matrix_N: N ranks (1-4), "auto" on a CUDA gang picks nccl; every
 *   collective x dtype x op, in place where the header allows it.
 * stream: an all-reduce on stream A waits for a copy on stream B that a
 *   slow host function holds back (an event B -> A).
 * group: a send/recv exchange both sides start by sending, and an
 *   all-reduce, in one group. split: 4 ranks split in two NCCL gangs.
 * remote_error / hang (double only): the double fails one rank's operation
 *   with ncclRemoteError, or holds it; every rank fails promptly
 *   (GANG_ERR_PEER_LOST / GANG_ERR_TIMEOUT), not at the gang's timeout.
 * abort: gang_abort from another thread ends a blocked all-reduce.
 * unavailable: no device, and a missing libnccl, are GANG_ERR_UNAVAILABLE
 *   within a second naming the cause, and a CPU gang still works after.
 *
 * The strict double (GANG_DOUBLE_STRICT=1, as CTest runs nccl.double.*)
 * aborts a rank that breaks a rule of the real libraries; besides, these
 * cases hold the module to c10d's contract:
 * late_input: an input written 200 ms late on the caller's stream (the
 *   legacy stream with no stream set, and a stream the gang was given) is
 *   read only once written, blocking and with a work.
 * device_guard: the gang reports the device it resolved, every call leaves
 *   the caller's thread on the device it was on, and a work waited for
 *   from a thread that never chose a device orders the gang device's
 *   stream.
 * in_progress: every collective and group returns ncclInProgress (as NCCL
 *   2.23+ on a non-blocking communicator) and results stay right.
 * teardown: gang_abort returns at once although NCCL's abort takes 500 ms,
 *   and an orderly destroy finalizes (300 ms on the double) without the 3 s
 *   an unfinalized ncclCommDestroy takes.
 * capture: an all-reduce captured into a CUDA graph runs at each launch.
 * pooled: no cudaEventCreate per operation once warm.
 * shrink (the module's table, as the core's shrink will call it): 3 ranks,
 *   rank 2 leaves; the survivors shrink with ncclCommShrink (healthy
 *   parent), then, after aborting, with a new communicator through the
 *   store; an all-reduce over each shrunk gang is right.
 * completion: with GANG_CUDA_COMPLETION_STREAM the first all-reduce of a
 *   fresh gang, queued behind 200 ms of a host function, returns at once
 *   and its result is right once the stream is (real NCCL's first
 *   collective synchronises with the device; the strict double models it);
 *   the default waits on the host; a bad mode is refused.
 *   completion_device_work: the same behind 300 ms of device work (memsets;
 *   a real GPU only).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>
#include <gang/gang_backend.h>

#include "harness.h"

#define WALL_S 120
#define MEMCPY_DEFAULT 4 /* cudaMemcpyDefault */

/* The CUDA runtime functions the test uses, by dlsym: the test links no
 * CUDA, so the same binary runs on the double and on a GPU. */
static struct {
  int (*GetDeviceCount)(int*);
  int (*SetDevice)(int);
  int (*GetDevice)(int*);
  int (*Malloc)(void**, size_t);
  int (*Free)(void*);
  int (*Memcpy)(void*, const void*, size_t, int);
  int (*MemcpyAsync)(void*, const void*, size_t, int, void*);
  int (*MemsetAsync)(void*, int, size_t, void*);
  int (*StreamCreate)(void**);
  int (*StreamDestroy)(void*);
  int (*StreamSynchronize)(void*);
  int (*EventCreate)(void**);
  int (*EventRecord)(void*, void*);
  int (*StreamWaitEvent)(void*, void*, unsigned);
  int (*LaunchHostFunc)(void*, void (*)(void*), void*);
  int (*DeviceSynchronize)(void);
  int (*StreamBeginCapture)(void*, int);
  int (*StreamEndCapture)(void*, void**);
  int (*GraphInstantiate)(void**, void*, unsigned long long);
  int (*GraphLaunch)(void*, void*);
  int (*GraphExecDestroy)(void*);
  int (*GraphDestroy)(void*);
} cu;

static int g_devices; /* visible devices, once no_gpu_reason found some */

static const char* no_gpu_reason(void) {
  static char why[512];
  void* lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
  int n = 0;
  if (lib == NULL) {
    snprintf(why, sizeof why, "the CUDA runtime cannot be loaded: %s", dlerror());
    return why;
  }
#define LOAD(f) *(void**)&cu.f = dlsym(lib, "cuda" #f)
  LOAD(GetDeviceCount);
  LOAD(SetDevice);
  LOAD(GetDevice);
  LOAD(Malloc);
  LOAD(Free);
  LOAD(Memcpy);
  LOAD(MemcpyAsync);
  LOAD(MemsetAsync);
  LOAD(StreamCreate);
  LOAD(StreamDestroy);
  LOAD(StreamSynchronize);
  LOAD(EventCreate);
  LOAD(EventRecord);
  LOAD(StreamWaitEvent);
  LOAD(LaunchHostFunc);
  LOAD(DeviceSynchronize);
  LOAD(StreamBeginCapture);
  LOAD(StreamEndCapture);
  LOAD(GraphInstantiate);
  LOAD(GraphLaunch);
  LOAD(GraphExecDestroy);
  LOAD(GraphDestroy);
#undef LOAD
  if (cu.GetDeviceCount == NULL) {
    snprintf(why, sizeof why, "the CUDA runtime has no cudaGetDeviceCount");
    return why;
  }
  /* Asked in a child: a parent that initialised CUDA could not fork ranks
   * that use it. The exit status is the count (0: none, or an error). */
  {
    const pid_t pid = fork();
    int status = 0;
    if (pid == 0) _exit(cu.GetDeviceCount(&n) == 0 && n > 0 ? (n > 100 ? 100 : n) : 0);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) == 0) {
      snprintf(why, sizeof why, "no CUDA device is visible");
      return why;
    }
    g_devices = WEXITSTATUS(status);
  }
  return NULL;
}

static int on_double(void) { return getenv("GANG_TEST_NCCL_DOUBLE") != NULL; }

/* Ranks share GPUs when there are fewer GPUs than a case has ranks: each
 * rank poses as a host of its own to NCCL (NCCL_HOSTID), which then talks
 * over its socket transport, a functional check of real NCCL (slow, not a
 * figure). GANG_TEST_GPU_SHARE=1 shares always, =0 never (such cases skip);
 * one GPU per rank stays the default where there are enough. */
static int g_share; /* this case's ranks share GPUs (set before they fork) */

static int sharing_gpus(void) { return g_share; }

/* Whether a case of `ranks` ranks runs on shared GPUs; says so when it does.
 * 0 with *why set when it must skip instead. */
static int decide_sharing(int ranks, const char** why) {
  static char fewer[160];
  const char* v = getenv("GANG_TEST_GPU_SHARE");
  g_share = 0;
  if (on_double() || *why != NULL) return 0;
  if (v != NULL && strcmp(v, "1") == 0) {
    g_share = 1;
  } else if (g_devices < ranks) {
    if (v != NULL && strcmp(v, "0") == 0) {
      snprintf(fewer, sizeof fewer, "%d GPU(s) visible, the test needs %d (NCCL takes one GPU per "
               "rank; GANG_TEST_GPU_SHARE=0 forbids sharing)", g_devices, ranks);
      *why = fewer;
      return 0;
    }
    g_share = 1;
  }
  if (g_share) {
    print_message("note: %d rank(s) share %d GPU(s), each a host of its own to NCCL (its socket "
                  "transport on lo)\n", ranks, g_devices);
  }
  return g_share;
}

/* Sharing GPUs, rank `rank` tells NCCL it is a host of its own. */
static void pose_as_own_host(int rank) {
  char host[32];
  if (!sharing_gpus()) return;
  snprintf(host, sizeof host, "gang-test-rank-%d", rank);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

static gang_t* cuda_gang(int rank, int size, const char* url, int64_t timeout_ms) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.device_type = GANG_DEVICE_CUDA;
  o.timeout_ms = timeout_ms;
  pose_as_own_host(rank);
  if (gang_create(&o, &g) != GANG_OK) {
    fprintf(stderr, "[rank %d] gang_create: %s\n", rank, gang_last_error());
    return NULL;
  }
  /* The device the gang resolved (local rank % visible devices): this
   * thread's buffers and streams belong there. */
  if (gang_device_index(g) < 0 || cu.SetDevice(gang_device_index(g)) != 0) {
    fprintf(stderr, "[rank %d] gang_device_index: %d\n", rank, gang_device_index(g));
    gang_destroy(g);
    return NULL;
  }
  return g;
}

static void* dalloc(size_t n) {
  void* p = NULL;
  return cu.Malloc(&p, n ? n : 1) == 0 ? p : NULL;
}
static void to_dev(void* d, const void* h, size_t n) {
  if (n) cu.Memcpy(d, h, n, MEMCPY_DEFAULT);
}
static void to_host(void* h, const void* d, size_t n) {
  cu.DeviceSynchronize();
  if (n) cu.Memcpy(h, d, n, MEMCPY_DEFAULT);
}

/* Element i of rank r: 1 or 2, so sums, products and averages of up to 4
 * ranks are exact in every dtype but AVG's fractions. */
static double val(int r, size_t i) { return 1.0 + (double)((r + (int)i) % 2); }

/* v as dt holds it (bool: 1). */
static double held(gang_dtype_t dt, double v) { return ref_to_double(dt, ref_from_double(dt, v)); }

static double reduced(gang_dtype_t dt, gang_op_t op, int size, size_t i) {
  double acc = val(0, i);
  int r;
  for (r = 1; r < size; ++r) {
    const double x = val(r, i);
    if (op == GANG_SUM || op == GANG_AVG) acc += x;
    if (op == GANG_PROD) acc *= x;
    if (op == GANG_MIN) acc = x < acc ? x : acc;
    if (op == GANG_MAX) acc = x > acc ? x : acc;
  }
  if (op == GANG_AVG) {
    acc /= size;
    if (!ref_dtype_is_float(dt)) acc = (double)(int64_t)acc;
  }
  if (dt == GANG_BOOL) return acc != 0; /* every input is true */
  return acc;
}

static int close_to(gang_dtype_t dt, double got, double want) {
  const double d = got > want ? got - want : want - got;
  return ref_dtype_is_float(dt) ? d <= 1e-2 * (want < 0 ? -want : want) + 1e-3 : d == 0;
}

static void fill(gang_dtype_t dt, void* h, size_t n, int r, size_t first) {
  size_t i;
  for (i = 0; i < n; ++i) ref_store(dt, h, i, ref_from_double(dt, val(r, first + i)));
}

#define COUNT 37

static int matrix(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  int d, o, place, r;
  size_t i;
  (void)arg;
  CHECK(g != NULL, "no gang");
  CHECK(strcmp(gang_backend_name(g), "nccl") == 0, "backend %s", gang_backend_name(g));
  for (d = 0; d < REF_NUM_DTYPES; ++d) {
    const gang_dtype_t dt = ref_dtypes[d];
    const size_t es = ref_dtype_size(dt), n = COUNT, all = n * (size_t)size;
    unsigned char* h = malloc(all * es * 2);
    unsigned char* want = malloc(all * es);
    void* send = dalloc(all * es);
    void* recv = dalloc(all * es);
    size_t counts[4], total = 0;
    CHECK(h && want && send && recv, "out of memory");

    for (o = 0; o < REF_NUM_OPS; ++o) {
      const gang_op_t op = ref_ops[o];
      if (!gang_supports(g, op, dt)) { /* NCCL reduces no int16; no bool AVG */
        CHECK(dt == GANG_INT16 || !ref_reducible(dt, op), "%s %s unsupported",
              ref_dtype_name(dt), ref_op_name(op));
        CHECK_STATUS(gang_all_reduce(g, send, recv, n, dt, op, NULL), GANG_ERR_UNSUPPORTED);
        continue;
      }
      for (place = 0; place < 2; ++place) {
        fill(dt, h, n, rank, 0);
        to_dev(send, h, n * es);
        to_dev(recv, h, n * es);
        CHECK_OK(gang_all_reduce(g, place ? recv : send, recv, n, dt, op, NULL));
        to_host(h, recv, n * es);
        for (i = 0; i < n; ++i) {
          const double got = ref_to_double(dt, ref_load(dt, h, i));
          CHECK(close_to(dt, got, reduced(dt, op, size, i)), "all_reduce %s %s%s [%zu] = %g",
                ref_dtype_name(dt), ref_op_name(op), place ? " in place" : "", i, got);
        }
      }
      fill(dt, h, n, rank, 0);
      to_dev(send, h, n * es);
      CHECK_OK(gang_reduce(g, send, recv, n, dt, op, size - 1, NULL));
      if (rank == size - 1) {
        to_host(h, recv, n * es);
        for (i = 0; i < n; ++i) {
          CHECK(close_to(dt, ref_to_double(dt, ref_load(dt, h, i)), reduced(dt, op, size, i)),
                "reduce %s %s [%zu]", ref_dtype_name(dt), ref_op_name(op), i);
        }
      }
      /* reduce_scatter: block p of every rank's input reduced into rank p. */
      for (r = 0; r < size; ++r) fill(dt, h + (size_t)r * n * es, n, rank, (size_t)r * n);
      to_dev(send, h, all * es);
      CHECK_OK(gang_reduce_scatter(g, send, recv, n, dt, op, NULL));
      to_host(h, recv, n * es);
      for (i = 0; i < n; ++i) {
        CHECK(close_to(dt, ref_to_double(dt, ref_load(dt, h, i)),
                       reduced(dt, op, size, (size_t)rank * n + i)),
              "reduce_scatter %s %s [%zu]", ref_dtype_name(dt), ref_op_name(op), i);
      }
      /* reduce_scatterv: rank p gets n - p elements. */
      for (r = 0, total = 0; r < size; ++r) total += counts[r] = n - (size_t)r;
      fill(dt, h, total, rank, 0);
      to_dev(send, h, total * es);
      CHECK_OK(gang_reduce_scatterv(g, send, recv, counts, (size_t)size, dt, op, NULL));
      to_host(h, recv, counts[rank] * es);
      {
        size_t at = 0;
        for (r = 0; r < rank; ++r) at += counts[r];
        for (i = 0; i < counts[rank]; ++i) {
          CHECK(close_to(dt, ref_to_double(dt, ref_load(dt, h, i)), reduced(dt, op, size, at + i)),
                "reduce_scatterv %s %s [%zu]", ref_dtype_name(dt), ref_op_name(op), i);
        }
      }
    }

    /* broadcast from the last rank */
    fill(dt, h, n, rank == size - 1 ? 7 : 0, 0);
    to_dev(recv, h, n * es);
    CHECK_OK(gang_broadcast(g, recv, n, dt, size - 1, NULL));
    to_host(h, recv, n * es);
    for (i = 0; i < n; ++i) {
      CHECK(ref_to_double(dt, ref_load(dt, h, i)) == held(dt, val(7, i)), "broadcast %s [%zu]",
            ref_dtype_name(dt), i);
    }
    /* all_gather, out of place and in place; gather to rank 0 */
    for (place = 0; place < 3; ++place) {
      fill(dt, h, n, rank, 0);
      if (place == 1) {
        to_dev((char*)recv + (size_t)rank * n * es, h, n * es);
        CHECK_OK(gang_all_gather(g, (char*)recv + (size_t)rank * n * es, recv, n, dt, NULL));
      } else {
        to_dev(send, h, n * es);
        if (place == 0) CHECK_OK(gang_all_gather(g, send, recv, n, dt, NULL));
        if (place == 2) CHECK_OK(gang_gather(g, send, recv, n, dt, 0, NULL));
      }
      if (place < 2 || rank == 0) {
        to_host(want, recv, all * es);
        for (r = 0; r < size; ++r) {
          for (i = 0; i < n; ++i) {
            CHECK(ref_to_double(dt, ref_load(dt, want, (size_t)r * n + i)) == held(dt, val(r, i)),
                  "%s %s [%d][%zu]", place == 2 ? "gather" : "all_gather", ref_dtype_name(dt), r, i);
          }
        }
      }
    }
    /* all_gatherv: rank p gives n - p elements */
    for (r = 0, total = 0; r < size; ++r) total += counts[r] = n - (size_t)r;
    fill(dt, h, counts[rank], rank, 0);
    to_dev(send, h, counts[rank] * es);
    CHECK_OK(gang_all_gatherv(g, send, counts[rank], recv, counts, (size_t)size, dt, NULL));
    to_host(want, recv, total * es);
    {
      size_t at = 0;
      for (r = 0; r < size; at += counts[r], ++r) {
        for (i = 0; i < counts[r]; ++i) {
          CHECK(ref_to_double(dt, ref_load(dt, want, at + i)) == held(dt, val(r, i)), "all_gatherv %s [%d][%zu]",
                ref_dtype_name(dt), r, i);
        }
      }
    }
    /* scatter from rank 0: block p is val(p, .) */
    for (r = 0; r < size; ++r) fill(dt, h + (size_t)r * n * es, n, r, 0);
    to_dev(send, h, all * es);
    CHECK_OK(gang_scatter(g, send, recv, n, dt, 0, NULL));
    to_host(h, recv, n * es);
    for (i = 0; i < n; ++i) {
      CHECK(ref_to_double(dt, ref_load(dt, h, i)) == held(dt, val(rank, i)), "scatter %s [%zu]",
            ref_dtype_name(dt), i);
    }
    /* all_to_all: block p of rank r's input holds val(r + 10 * p, .) */
    for (r = 0; r < size; ++r) fill(dt, h + (size_t)r * n * es, n, rank + 10 * r, 0);
    to_dev(send, h, all * es);
    CHECK_OK(gang_all_to_all(g, send, recv, n, dt, NULL));
    to_host(h, recv, all * es);
    for (r = 0; r < size; ++r) {
      for (i = 0; i < n; ++i) {
        CHECK(ref_to_double(dt, ref_load(dt, h, (size_t)r * n + i)) == held(dt, val(r + 10 * rank, i)),
              "all_to_all %s [%d][%zu]", ref_dtype_name(dt), r, i);
      }
    }
    /* send/recv round the ring (tag 0); another tag is refused */
    if (size > 1) {
      const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
      fill(dt, h, n, rank, 0);
      to_dev(send, h, n * es);
      CHECK_OK(gang_group_start(g));
      CHECK_OK(gang_send(g, send, n, dt, next, 0, NULL));
      CHECK_OK(gang_recv(g, recv, n, dt, prev, 0, NULL));
      CHECK_OK(gang_group_end(g, NULL));
      to_host(h, recv, n * es);
      for (i = 0; i < n; ++i) {
        CHECK(ref_to_double(dt, ref_load(dt, h, i)) == held(dt, val(prev, i)), "send/recv %s [%zu]",
              ref_dtype_name(dt), i);
      }
      CHECK_STATUS(gang_send(g, send, n, dt, next, 3, NULL), GANG_ERR_UNSUPPORTED);
    }
    cu.Free(send);
    cu.Free(recv);
    free(h);
    free(want);
  }
  CHECK_OK(gang_barrier(g, NULL));
  CHECK_OK(gang_destroy(g));
  return 0;
}


/* Skips, saying why, without a GPU, or (on real GPUs) with fewer GPUs than
 * ranks: NCCL refuses two ranks on one GPU, which the double allows. */
static void run_or_skip(int size, gang_test_plain_fn fn) {
  const char* why = no_gpu_reason();
  decide_sharing(size, &why);
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  assert_int_equal(gang_test_run_procs(size, fn, NULL, WALL_S), 0);
}

static void test_matrix_1(void** s) { (void)s; run_or_skip(1, matrix); }
static void test_matrix_2(void** s) { (void)s; run_or_skip(2, matrix); }
static void test_matrix_3(void** s) { (void)s; run_or_skip(3, matrix); }
static void test_matrix_4(void** s) { (void)s; run_or_skip(4, matrix); }

/* ---- stream ordering ------------------------------------------------------ */

static void slow(void* arg) {
  (void)arg;
  usleep(200 * 1000);
}

static int stream_order(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  float h[64], *host = h;
  void *a = NULL, *b = NULL, *ev = NULL;
  float* buf = dalloc(sizeof h);
  gang_work_t* w = NULL;
  size_t i;
  (void)arg;
  CHECK(g != NULL && buf != NULL, "setup");
  for (i = 0; i < 64; ++i) h[i] = 0;
  to_dev(buf, h, sizeof h);
  for (i = 0; i < 64; ++i) h[i] = (float)(rank + 1);
  CHECK(cu.StreamCreate(&a) == 0 && cu.StreamCreate(&b) == 0 && cu.EventCreate(&ev) == 0,
        "streams");
  /* On B: a slow host function, then the copy of the input. */
  CHECK(cu.LaunchHostFunc(b, slow, NULL) == 0, "host function");
  CHECK(cu.MemcpyAsync(buf, host, sizeof h, MEMCPY_DEFAULT, b) == 0, "copy");
  CHECK(cu.EventRecord(ev, b) == 0 && cu.StreamWaitEvent(a, ev, 0) == 0, "event");
  CHECK_OK(gang_set_cuda_stream(g, a));
  CHECK_OK(gang_all_reduce(g, buf, buf, 64, GANG_FLOAT32, GANG_SUM, &w));
  CHECK_OK(gang_work_wait(w, -1));
  CHECK_OK(gang_work_destroy(w));
  cu.StreamSynchronize(a);
  to_host(h, buf, sizeof h);
  for (i = 0; i < 64; ++i) {
    CHECK(h[i] == (float)(size * (size + 1) / 2), "[%zu] = %g: the all-reduce did not wait for "
          "the copy on the other stream", i, h[i]);
  }

  /* NULL is the legacy default stream, not the gang's own: an all-reduce
   * issued there waits for a slow copy queued on it. */
  for (i = 0; i < 64; ++i) h[i] = 0;
  to_dev(buf, h, sizeof h);
  for (i = 0; i < 64; ++i) h[i] = (float)(rank + 1);
  CHECK_OK(gang_set_cuda_stream(g, NULL));
  CHECK(cu.LaunchHostFunc(NULL, slow, NULL) == 0, "host function");
  CHECK(cu.MemcpyAsync(buf, host, sizeof h, MEMCPY_DEFAULT, NULL) == 0, "copy");
  CHECK_OK(gang_all_reduce(g, buf, buf, 64, GANG_FLOAT32, GANG_SUM, NULL));
  to_host(h, buf, sizeof h);
  for (i = 0; i < 64; ++i) {
    CHECK(h[i] == (float)(size * (size + 1) / 2), "[%zu] = %g: the all-reduce did not run on "
          "the legacy default stream", i, h[i]);
  }
  CHECK_OK(gang_destroy(g));
  cu.StreamDestroy(a);
  cu.StreamDestroy(b);
  return 0;
}

static void test_stream(void** s) { (void)s; run_or_skip(2, stream_order); }

/* ---- groups and splits ---------------------------------------------------- */

static int group(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  int64_t mine[8], theirs[8], sum[8];
  int64_t* d = dalloc(3 * sizeof mine);
  int i;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < 8; ++i) mine[i] = rank * 100 + i;
  to_dev(d, mine, sizeof mine);
  to_dev(d + 16, mine, sizeof mine);
  CHECK_OK(gang_group_start(g));
  CHECK_OK(gang_send(g, d, 8, GANG_INT64, 1 - rank, 0, NULL));
  CHECK_OK(gang_recv(g, d + 8, 8, GANG_INT64, 1 - rank, 0, NULL));
  CHECK_OK(gang_all_reduce(g, d + 16, d + 16, 8, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(gang_group_end(g, NULL));
  to_host(theirs, d + 8, sizeof theirs);
  to_host(sum, d + 16, sizeof sum);
  for (i = 0; i < 8; ++i) {
    CHECK(theirs[i] == (1 - rank) * 100 + i, "received [%d] = %lld", i, (long long)theirs[i]);
    CHECK(sum[i] == 100 + 2 * i, "sum [%d] = %lld", i, (long long)sum[i]);
  }
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_group(void** s) { (void)s; run_or_skip(2, group); }

/* ncclCommSplit calls the double made in this process; -1 off the double. */
static int double_splits(void) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
  int (*count)(void) = NULL;
  int n = -1;
  if (lib == NULL) return -1;
  *(void**)&count = dlsym(lib, "gang_nccl_double_splits");
  if (count != NULL) n = count();
  dlclose(lib);
  return n;
}

/* Two splits of 4 ranks: into halves by parity, then ranks 0-2 with rank 3
 * staying out (reversed by key). Both natively (ncclCommSplit, which rank 3
 * joins with no color), or, with an NCCL that lacks it, by new
 * communicators. */
static int split(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  gang_t *half = NULL, *three = NULL;
  int32_t x = rank, *d = dalloc(sizeof x);
  int n;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  CHECK_OK(gang_split(g, rank % 2, rank, &half));
  CHECK(half != NULL && gang_size(half) == size / 2, "split");
  CHECK(strcmp(gang_backend_name(half), "nccl") == 0, "split backend %s", gang_backend_name(half));
  to_dev(d, &x, sizeof x);
  CHECK_OK(gang_all_reduce(half, d, d, 1, GANG_INT32, GANG_SUM, NULL));
  to_host(&x, d, sizeof x);
  CHECK(x == (rank % 2 == 0 ? 0 + 2 : 1 + 3), "sum in the half: %d", x);

  CHECK_OK(gang_split(g, rank == 3 ? GANG_COLOR_NONE : 0, -rank, &three));
  if (rank == 3) {
    CHECK(three == NULL, "rank 3 is in a gang it stayed out of");
  } else {
    CHECK(three != NULL && gang_size(three) == 3 && gang_rank(three) == 2 - rank,
          "rank %d of the three: %d", rank, three != NULL ? gang_rank(three) : -1);
    x = 10 * (rank + 1);
    to_dev(d, &x, sizeof x);
    CHECK_OK(gang_all_reduce(three, d, d, 1, GANG_INT32, GANG_SUM, NULL));
    to_host(&x, d, sizeof x);
    CHECK(x == 60, "sum of the three: %d", x);
    CHECK_OK(gang_destroy(three));
  }
  n = double_splits();
  if (on_double()) {
    const int want = getenv("GANG_TEST_NCCL_NO_SPLIT") != NULL ? 0 : 2;
    CHECK(n == want, "rank %d: %d ncclCommSplit calls, expected %d", rank, n, want);
  }
  CHECK_OK(gang_destroy(half));
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_split(void** s) { (void)s; run_or_skip(4, split); }

/* ---- c10d's stream contract ------------------------------------------------ */

#define LATE_N 65536

/* Queues, on stream s, a 200 ms pause and then the copy of x into d. */
static void write_late(void* s, float* d, const float* x) {
  cu.LaunchHostFunc(s, slow, NULL);
  cu.MemcpyAsync(d, x, LATE_N * sizeof(float), MEMCPY_DEFAULT, s);
}

static int count_wrong(float* d, int size) {
  static float h[LATE_N];
  int wrong = 0, i;
  to_host(h, d, sizeof h);
  for (i = 0; i < LATE_N; ++i) wrong += h[i] != (float)(size * (size + 1) / 2);
  return wrong;
}

static int late_input(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  static float x[LATE_N], zero[LATE_N];
  float* d = dalloc(sizeof x);
  void* user = NULL;
  gang_work_t* w = NULL;
  int i, wrong;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < LATE_N; ++i) x[i] = (float)(rank + 1);
  /* No stream set: the legacy default stream is the caller's. */
  to_dev(d, zero, sizeof zero);
  write_late(NULL, d, x);
  CHECK_OK(gang_all_reduce(g, d, d, LATE_N, GANG_FLOAT32, GANG_SUM, NULL));
  wrong = count_wrong(d, size);
  CHECK(wrong == 0, "blocking, no stream set: %d of %d elements wrong (the input was read "
        "before the legacy stream wrote it)", wrong, LATE_N);
  to_dev(d, zero, sizeof zero);
  write_late(NULL, d, x);
  CHECK_OK(gang_all_reduce(g, d, d, LATE_N, GANG_FLOAT32, GANG_SUM, &w));
  CHECK_OK(gang_work_wait(w, -1));
  CHECK_OK(gang_work_destroy(w));
  wrong = count_wrong(d, size);
  CHECK(wrong == 0, "work, no stream set: %d of %d elements wrong", wrong, LATE_N);
  /* A stream of the user's. */
  CHECK(cu.StreamCreate(&user) == 0, "stream");
  CHECK_OK(gang_set_cuda_stream(g, user));
  to_dev(d, zero, sizeof zero);
  write_late(user, d, x);
  CHECK_OK(gang_all_reduce(g, d, d, LATE_N, GANG_FLOAT32, GANG_SUM, NULL));
  wrong = count_wrong(d, size);
  CHECK(wrong == 0, "user stream: %d of %d elements wrong", wrong, LATE_N);
  CHECK_OK(gang_destroy(g));
  cu.StreamDestroy(user);
  cu.Free(d);
  return 0;
}

static void test_late_input(void** s) { (void)s; run_or_skip(2, late_input); }

/* ---- devices --------------------------------------------------------------- */

struct waiter {
  gang_work_t* w;
  gang_status_t st;
};

static void* wait_elsewhere(void* p) {
  struct waiter* a = p;
  a->st = gang_work_wait(a->w, -1);
  return NULL;
}

static int device_guard(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  int count = 0, dev = -1, other;
  float x = (float)(rank + 1), *d;
  struct waiter a = {NULL, GANG_ERR_INTERNAL};
  pthread_t t;
  (void)arg;
  CHECK(g != NULL, "setup");
  CHECK(cu.GetDeviceCount(&count) == 0 && count > 0, "devices");
  if (count < size) {
    CHECK_OK(gang_destroy(g));
    return 0; /* the caller skipped already, saying why */
  }
  CHECK(gang_device_index(g) == rank % count, "gang_device_index %d, expected %d (local rank "
        "%% visible devices)", gang_device_index(g), rank % count);
  d = dalloc(sizeof x);
  CHECK(d != NULL, "alloc");
  to_dev(d, &x, sizeof x);
  /* The caller's thread is on another device: it stays there. */
  other = (rank + 1) % count;
  CHECK(cu.SetDevice(other) == 0, "cudaSetDevice");
  CHECK_OK(gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, &a.w));
  CHECK(cu.GetDevice(&dev) == 0 && dev == other, "the call left this thread on device %d, "
        "not %d", dev, other);
  /* Waited for from a thread that never chose a device. */
  CHECK(pthread_create(&t, NULL, wait_elsewhere, &a) == 0, "thread");
  pthread_join(t, NULL);
  CHECK_OK(a.st);
  CHECK_OK(gang_work_destroy(a.w));
  CHECK_OK(gang_barrier(g, NULL));
  CHECK(cu.GetDevice(&dev) == 0 && dev == other, "the barrier left this thread on device %d",
        dev);
  CHECK(cu.SetDevice(gang_device_index(g)) == 0, "back");
  to_host(&x, d, sizeof x);
  CHECK(x == (float)(size * (size + 1) / 2), "sum %g", x);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_device_guard(void** s) { (void)s; run_or_skip(2, device_guard); }

/* ---- in progress ----------------------------------------------------------- */

static void test_in_progress(void** s) {
  const char* why = no_gpu_reason();
  (void)s;
  if (why == NULL && !on_double()) why = "ncclInProgress is forced by the host double only";
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  setenv("GANG_NCCL_DOUBLE_INPROGRESS", "always", 1);
  assert_int_equal(gang_test_run_procs(2, matrix, NULL, WALL_S), 0);
  assert_int_equal(gang_test_run_procs(2, group, NULL, WALL_S), 0);
  assert_int_equal(gang_test_run_procs(4, split, NULL, WALL_S), 0);
  unsetenv("GANG_NCCL_DOUBLE_INPROGRESS");
}

/* ---- teardown -------------------------------------------------------------- */

static int teardown(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 30000);
  gang_t* h = cuda_gang(rank, size, url, 30000);
  float* d = dalloc(16 * sizeof(float));
  int64_t t0;
  (void)arg;
  CHECK(g != NULL && h != NULL && d != NULL, "setup");
  CHECK_OK(gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK_OK(gang_all_reduce(h, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL));
  /* Orderly: finalized, then destroyed, without the wait of an unfinalized
   * destroy. */
  t0 = gang_test_now_ms();
  CHECK_OK(gang_destroy(g));
  CHECK(gang_test_now_ms() - t0 < 2500, "an orderly destroy took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  /* Abort returns at once; NCCL's abort runs elsewhere. */
  t0 = gang_test_now_ms();
  CHECK_OK(gang_abort(h));
  CHECK(gang_test_now_ms() - t0 < 250, "gang_abort took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  CHECK_STATUS(gang_all_reduce(h, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL), GANG_ERR_ABORTED);
  t0 = gang_test_now_ms();
  gang_destroy(h);
  CHECK(gang_test_now_ms() - t0 < 2500, "destroying an aborted gang took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  return 0;
}

static void test_teardown(void** s) { (void)s; run_or_skip(2, teardown); }

/* ---- CUDA graphs ----------------------------------------------------------- */

static int captured(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  float x = 1, *d = dalloc(sizeof x);
  void *s = NULL, *graph = NULL, *exec = NULL;
  int64_t t0;
  int i;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  if (cu.StreamBeginCapture == NULL || cu.GraphLaunch == NULL) {
    gang_destroy(g);
    return 0;
  }
  to_dev(d, &x, sizeof x);
  CHECK(cu.StreamCreate(&s) == 0, "stream");
  CHECK_OK(gang_set_cuda_stream(g, s));
  CHECK(cu.StreamBeginCapture(s, 0) == 0, "cudaStreamBeginCapture");
  t0 = gang_test_now_ms();
  CHECK_OK(gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK(gang_test_now_ms() - t0 < 1000, "a captured all-reduce blocked %lld ms",
        (long long)(gang_test_now_ms() - t0));
  CHECK(cu.StreamEndCapture(s, &graph) == 0 && graph != NULL,
        "the capture was invalidated (an event or a host wait on the capturing stream?)");
  CHECK(cu.GraphInstantiate(&exec, graph, 0) == 0, "cudaGraphInstantiate");
  for (i = 0; i < 3; ++i) CHECK(cu.GraphLaunch(exec, s) == 0, "cudaGraphLaunch");
  cu.StreamSynchronize(s);
  to_host(&x, d, sizeof x);
  CHECK(x == (float)(size * size * size), "after 3 launches: %g, expected %d", x, size * size * size);
  /* The gang goes on outside the capture. */
  CHECK_OK(gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL));
  cu.StreamSynchronize(s);
  to_host(&x, d, sizeof x);
  CHECK(x == (float)(size * size * size * size), "after the capture: %g", x);
  cu.GraphExecDestroy(exec);
  cu.GraphDestroy(graph);
  CHECK_OK(gang_destroy(g));
  cu.StreamDestroy(s);
  return 0;
}

static void test_capture(void** s) { (void)s; run_or_skip(2, captured); }

/* ---- pooled events ----------------------------------------------------------- */

static long events_created(void) {
  void* lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
  long (*count)(void) = NULL;
  long n = -1;
  if (lib == NULL) return -1;
  *(void**)&count = dlsym(lib, "gang_cuda_double_events_created");
  if (count != NULL) n = count();
  dlclose(lib);
  return n;
}

static int pooled(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  float* d = dalloc(64 * sizeof(float));
  long before, after;
  int i;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < 10; ++i) CHECK_OK(gang_all_reduce(g, d, d, 64, GANG_FLOAT32, GANG_SUM, NULL));
  before = events_created();
  for (i = 0; i < 200; ++i) {
    gang_work_t* w = NULL;
    CHECK_OK(gang_all_reduce(g, d, d, 64, GANG_FLOAT32, GANG_SUM, i % 2 ? &w : NULL));
    if (w != NULL) {
      CHECK_OK(gang_work_wait(w, -1));
      CHECK_OK(gang_work_destroy(w));
    }
  }
  after = events_created();
  CHECK(after - before == 0, "%ld cudaEventCreate calls in 200 operations", after - before);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_pooled(void** s) {
  const char* why = no_gpu_reason();
  (void)s;
  if (why == NULL && !on_double()) why = "the host double counts cudaEventCreate";
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  assert_int_equal(gang_test_run_procs(2, pooled, NULL, WALL_S), 0);
}

/* ---- completion modes ------------------------------------------------------ */

/* Holds stream s for about `ms` with device work, as programs hold it: on
 * a real GPU, memsets of a large buffer, as many as a timed batch says take
 * that long. The buffer to free, or NULL on the double, whose device work
 * is host functions anyway. */
static void* hold_with_device_work(void* s, int64_t ms) {
  const size_t len = (size_t)256 << 20;
  void* buf;
  int64_t t0, batch;
  long i, n;
  if (on_double() || cu.MemsetAsync == NULL || (buf = dalloc(len)) == NULL) return NULL;
  t0 = gang_test_now_ms();
  for (i = 0; i < 200; ++i) cu.MemsetAsync(buf, (int)(i & 0xff), len, s);
  cu.StreamSynchronize(s);
  batch = gang_test_now_ms() - t0;
  n = batch > 0 ? (long)(ms * 200 / batch) : 200 * ms;
  if (n > 200000) n = 200000;
  for (i = 0; i < n; ++i) cu.MemsetAsync(buf, (int)(i & 0xff), len, s);
  return buf;
}

/* The first collective of a fresh gang, in stream completion, while the
 * caller's stream is held for 200-300 ms (by a host function, or on a GPU
 * by device work): it returns at once and its result is right once the
 * stream is. Real NCCL's first collective on a communicator synchronises
 * with the device (the strict double models it): the module warms the
 * communicator up while it makes it. Then the default: the host waits. */
static int first_call_behind(int rank, int size, const char* url, int device_work) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  float x = (float)(rank + 1), *d = dalloc(sizeof x);
  void* s = NULL;
  void* held = NULL;
  void* held_again = NULL;
  int64_t t0, took;
  const char* how = device_work ? "device work" : "a host function";
  CHECK(g != NULL && d != NULL && cu.StreamCreate(&s) == 0, "setup");
  CHECK_STATUS(gang_set_cuda_completion(g, (gang_cuda_completion_t)7), GANG_ERR_INVALID_ARGUMENT);
  CHECK(strstr(gang_last_error(), "mode") != NULL, "message: %s", gang_last_error());
  CHECK_OK(gang_set_cuda_stream(g, s));
  CHECK_OK(gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_STREAM));
  to_dev(d, &x, sizeof x);
  if (device_work) {
    held = hold_with_device_work(s, 300);
    CHECK(held != NULL, "device work");
  } else {
    CHECK(cu.LaunchHostFunc(s, slow, NULL) == 0, "host function");
  }
  t0 = gang_test_now_ms();
  CHECK_OK(gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL));
  took = gang_test_now_ms() - t0;
  CHECK(took < 150, "stream completion behind %s: the first call waited %lld ms for the device",
        how, (long long)took);
  cu.StreamSynchronize(s);
  to_host(&x, d, sizeof x);
  CHECK(x == (float)(size * (size + 1) / 2), "stream completion: sum %g", x);
  /* The default again: the host waits for the device. */
  CHECK_OK(gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_HOST));
  if (device_work) {
    held_again = hold_with_device_work(s, 300);
    CHECK(held_again != NULL, "device work");
  } else {
    CHECK(cu.LaunchHostFunc(s, slow, NULL) == 0, "host function");
  }
  t0 = gang_test_now_ms();
  CHECK_OK(gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL));
  took = gang_test_now_ms() - t0;
  CHECK(took >= 150, "host completion behind %s returned after %lld ms, before the device", how,
        (long long)took);
  CHECK_OK(gang_destroy(g));
  cu.StreamSynchronize(s);
  if (held != NULL) cu.Free(held);
  if (held_again != NULL) cu.Free(held_again);
  cu.StreamDestroy(s);
  return 0;
}

static int completion(int rank, int size, const char* url, void* arg) {
  (void)arg;
  return first_call_behind(rank, size, url, 0);
}

static int completion_device_work(int rank, int size, const char* url, void* arg) {
  (void)arg;
  return first_call_behind(rank, size, url, 1);
}

static void test_completion(void** s) { (void)s; run_or_skip(2, completion); }
static void test_completion_device_work(void** s) {
  (void)s;
  if (on_double()) {
    print_message("skipped: the host double's device work is host functions (test_completion)\n");
    skip();
  }
  run_or_skip(2, completion_device_work);
}

/* ---- shrinking, through the module's table ------------------------------------ */

/* The gang's store as the module's callbacks: keys under a prefix. */
struct cstore {
  gang_store_t* s;
  char prefix[32];
};

static void cs_key(struct cstore* c, const char* key, char* out, size_t n) {
  snprintf(out, n, "%s/%s", c->prefix, key);
}

static gang_status_t cs_set(void* ctx, const char* key, const void* data, size_t len, char* err,
                            size_t err_len) {
  char k[256];
  gang_status_t st;
  cs_key(ctx, key, k, sizeof k);
  st = gang_store_set(((struct cstore*)ctx)->s, k, data, len);
  if (st != GANG_OK) snprintf(err, err_len, "%s", gang_last_error());
  return st;
}

static gang_status_t cs_get(void* ctx, const char* key, int64_t timeout_ms, void** data,
                            size_t* len, char* err, size_t err_len) {
  char k[256];
  gang_status_t st;
  void* v = NULL;
  (void)timeout_ms;
  cs_key(ctx, key, k, sizeof k);
  st = gang_store_get(((struct cstore*)ctx)->s, k, &v, len);
  if (st != GANG_OK) {
    snprintf(err, err_len, "%s", gang_last_error());
    return st;
  }
  /* The module frees with free(): hand it a malloc'd copy. */
  *data = malloc(*len ? *len : 1);
  if (*len) memcpy(*data, v, *len);
  gang_free(v);
  return GANG_OK;
}

static gang_status_t cs_add(void* ctx, const char* key, int64_t delta, int64_t* out, char* err,
                            size_t err_len) {
  char k[256];
  gang_status_t st;
  cs_key(ctx, key, k, sizeof k);
  st = gang_store_add(((struct cstore*)ctx)->s, k, delta, out);
  if (st != GANG_OK) snprintf(err, err_len, "%s", gang_last_error());
  return st;
}

static gang_status_t cs_remove(void* ctx, const char* key, char* err, size_t err_len) {
  char k[256];
  gang_status_t st;
  cs_key(ctx, key, k, sizeof k);
  st = gang_store_delete(((struct cstore*)ctx)->s, k);
  if (st != GANG_OK) snprintf(err, err_len, "%s", gang_last_error());
  return st;
}

/* The NCCL module's table, loaded as gang loads it (beside libgang). */
static const gang_backend_t* nccl_table(void) {
  Dl_info info;
  char path[4096], *slash;
  void* lib;
  gang_backend_plugin_fn entry;
  if (dladdr((void*)gang_create, &info) == 0 || info.dli_fname == NULL) return NULL;
  snprintf(path, sizeof path, "%s", info.dli_fname);
  slash = strrchr(path, '/');
  if (slash == NULL) return NULL;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/gang/libgang-nccl.so");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return NULL;
  *(void**)&entry = dlsym(lib, GANG_BACKEND_ENTRY);
  return entry != NULL ? entry() : NULL;
}

/* One all-reduce of 4 int32 (each rank gives rank + 1) on an instance;
 * 0 if the sum is `want`. */
static int table_sum(const gang_backend_t* t, void* inst, int rank, int want) {
  int32_t h[4] = {rank + 1, rank + 1, rank + 1, rank + 1};
  int32_t* d = dalloc(sizeof h);
  gang_backend_op_t op;
  void* w = NULL;
  char err[512] = "";
  int i;
  CHECK(d != NULL, "alloc");
  to_dev(d, h, sizeof h);
  memset(&op, 0, sizeof op);
  op.struct_size = sizeof op;
  op.kind = GANG_BACKEND_OP_ALL_REDUCE;
  op.dtype = GANG_INT32;
  op.op = GANG_SUM;
  op.send = d;
  op.recv = d;
  op.count = 4;
  op.deadline_ns = (int64_t)gang_test_now_ms() * 1000000 + 30000000000LL;
  CHECK(t->post(inst, &op, 1, &w, err, sizeof err) == GANG_OK, "post: %s", err);
  if (w != NULL) {
    CHECK(t->wait(w, op.deadline_ns, err, sizeof err) == GANG_OK, "wait: %s", err);
    t->work_free(w);
  }
  to_host(h, d, sizeof h);
  for (i = 0; i < 4; ++i) CHECK(h[i] == want, "sum [%d] = %d, expected %d", i, h[i], want);
  cu.Free(d);
  return 0;
}

static int shrinking(int rank, int size, const char* url, void* arg) {
  const gang_backend_t* t = nccl_table();
  struct cstore root_store, shrunk_store, again_store;
  gang_backend_store_t cb[3];
  gang_backend_config_t c;
  void *parent = NULL, *shrunk = NULL, *again = NULL;
  gang_store_t* s = NULL;
  const int32_t gone[1] = {2};
  char err[512] = "";
  int i;
  (void)arg;
  CHECK(t != NULL && t->struct_size >= offsetof(gang_backend_t, shrink) + sizeof t->shrink &&
            t->shrink != NULL,
        "the NCCL module has no shrink");
  CHECK_OK(gang_store_create(url, 0, 30000, &s));
  pose_as_own_host(rank); /* the module is driven directly here */
  root_store.s = shrunk_store.s = again_store.s = s;
  snprintf(root_store.prefix, sizeof root_store.prefix, "root");
  snprintf(shrunk_store.prefix, sizeof shrunk_store.prefix, "shrunk");
  snprintf(again_store.prefix, sizeof again_store.prefix, "again");
  for (i = 0; i < 3; ++i) {
    cb[i].ctx = i == 0 ? &root_store : i == 1 ? &shrunk_store : &again_store;
    cb[i].set = cs_set;
    cb[i].get = cs_get;
    cb[i].add = cs_add;
    cb[i].remove = cs_remove;
  }
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.rank = rank;
  c.size = size;
  c.local_rank = rank;
  c.local_size = size;
  c.device_type = GANG_DEVICE_CUDA;
  c.device_index = -1;
  c.timeout_ms = 30000;
  c.host_id = "host";
  c.gang_name = "shrink-test";
  c.store = &cb[0];
  c.color = -1;
  CHECK(t->create(&c, &parent, err, sizeof err) == GANG_OK, "create: %s", err);
  /* The module picks local rank % visible devices. */
  CHECK(t->device_index(parent) == rank % g_devices, "device %d of %d", t->device_index(parent),
        g_devices);
  CHECK(cu.SetDevice(t->device_index(parent)) == 0, "device");
  CHECK(table_sum(t, parent, rank, 1 + 2 + 3) == 0, "sum of 3");
  if (rank == 2) {
    /* Leaves without a word (its peers shrink without it). */
    gang_test_shared_ints()[0] = 1;
    CHECK(gang_test_wait_shared(1, 2, 60000) == 0, "the survivors never ended");
    return 0;
  }
  CHECK(gang_test_wait_shared(0, 1, 60000) == 0, "rank 2 never left");
  /* A healthy parent: ncclCommShrink where the library has it. */
  c.size = 2;
  c.parent = parent;
  c.store = &cb[1];
  CHECK(t->shrink(parent, gone, 1, &c, &shrunk, err, sizeof err) == GANG_OK, "shrink: %s", err);
  CHECK(shrunk != NULL && t->device_index(shrunk) == t->device_index(parent), "shrunk instance");
  CHECK(table_sum(t, shrunk, rank, 1 + 2) == 0, "sum of the 2 survivors");
  /* A failed parent has no communicator to shrink: a new one, through the
   * store. */
  t->abort(parent);
  c.store = &cb[2];
  CHECK(t->shrink(parent, gone, 1, &c, &again, err, sizeof err) == GANG_OK, "shrink after abort: %s",
        err);
  CHECK(table_sum(t, again, rank, 1 + 2) == 0, "sum after the second shrink");
  t->finalize(shrunk);
  t->destroy(shrunk);
  t->finalize(again);
  t->destroy(again);
  t->destroy(parent);
  if (on_double()) {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD);
    int (*count)(void) = NULL;
    if (lib != NULL) *(void**)&count = dlsym(lib, "gang_nccl_double_shrinks");
    if (count != NULL) {
      const int want = getenv("GANG_TEST_NCCL_NO_SPLIT") != NULL ? 0 : 1;
      CHECK(count() == want, "%d ncclCommShrink calls, expected %d (1: the healthy parent, "
            "where NCCL has it)", count(), want);
    }
  }
  __sync_fetch_and_add((int64_t*)&gang_test_shared_ints()[1], 1);
  gang_store_destroy(s);
  return 0;
}

static void test_shrink(void** s) { (void)s; run_or_skip(3, shrinking); }

/* gang_shrink on a CUDA gang: rank 2 of 3 is SIGKILLed after an
 * all-reduce; the survivors' next one fails naming it, they shrink to a
 * CUDA gang of 2 ("root/shrink1") and all-reduce on the device there. */
static int shrinking_gang(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 10000);
  gang_t* small = NULL;
  float* d = dalloc(16 * sizeof(float));
  float h[16];
  gang_status_t st = GANG_OK;
  int i;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < 16; ++i) h[i] = 1.0f;
  to_dev(d, h, sizeof h);
  CHECK_OK(gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL));
  to_host(h, d, sizeof h);
  CHECK(h[0] == (float)size, "sum %g", h[0]);
  if (rank == 2) raise(SIGKILL);
  for (i = 0; i < 50 && st == GANG_OK; ++i) {
    st = gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL);
    to_host(h, d, sizeof h);
  }
  CHECK(st != GANG_OK, "every all-reduce with a dead rank succeeded");
  CHECK_OK(gang_shrink(g, 0, &small));
  CHECK(gang_size(small) == 2 && gang_rank(small) == rank, "rank %d of %d",
        gang_rank(small), gang_size(small));
  CHECK(gang_device_type(small) == GANG_DEVICE_CUDA, "the shrunk gang is not a CUDA gang");
  CHECK(strcmp(gang_name(small), "root/shrink1") == 0, "named %s", gang_name(small));
  for (i = 0; i < 16; ++i) h[i] = (float)(rank + 1);
  to_dev(d, h, sizeof h);
  CHECK_OK(gang_all_reduce(small, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL));
  to_host(h, d, sizeof h);
  for (i = 0; i < 16; ++i) CHECK(h[i] == 3.0f, "h[%d] = %g after the shrink", i, h[i]);
  CHECK_OK(gang_destroy(small));
  gang_destroy(g);
  cu.Free(d);
  return 0;
}

static void test_gang_shrink(void** s) {
  gang_test_opts_t o;
  const char* why = no_gpu_reason();
  (void)s;
  decide_sharing(3, &why);
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  gang_test_opts_init(&o);
  o.size = 3;
  o.plain_fn = shrinking_gang;
  o.wall_timeout_s = WALL_S;
  o.killed_rank = 2;
  assert_int_equal(gang_test_run(&o), 0);
}

/* ---- failures ------------------------------------------------------------- */

/* Issues all-reduces until one fails; that status must come well before the
 * gang's 30 s timeout. */
static int until_failure(int rank, int size, const char* url, void* arg) {
  const int want = *(const int*)arg;
  gang_t* g = cuda_gang(rank, size, url, want == GANG_ERR_TIMEOUT ? 2000 : 30000);
  float* d = dalloc(16 * sizeof(float));
  const int64_t t0 = gang_test_now_ms();
  gang_status_t s = GANG_OK;
  int i;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < 20 && s == GANG_OK; ++i) {
    s = gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL);
  }
  CHECK(s != GANG_OK, "no operation failed");
  CHECK(s == want || s == GANG_ERR_PEER_LOST, "got %s: %s", gang_status_name(s), gang_last_error());
  CHECK(gang_test_now_ms() - t0 < 10000, "failed after %lld ms", (long long)(gang_test_now_ms() - t0));
  gang_destroy(g);
  return 0;
}

static void with_fault(const char* fault, int want) {
  const char* why = no_gpu_reason();
  if (why == NULL && !on_double()) why = "faults are injected by the host double only";
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  setenv("GANG_NCCL_DOUBLE_FAULT", fault, 1);
  assert_int_equal(gang_test_run_procs(2, until_failure, &want, WALL_S), 0);
  unsetenv("GANG_NCCL_DOUBLE_FAULT");
}

/* The double counts a process's operations: a gang's first is the module's
 * own (it warms the communicator up while making it), so the test's third
 * is the fourth. */
static void test_remote_error(void** s) { (void)s; with_fault("remote_error:1:4", GANG_ERR_PEER_LOST); }
static void test_hang(void** s) { (void)s; with_fault("hang:0:4", GANG_ERR_TIMEOUT); }

/* Rank 1 fails at its third operation without a word on the wire (its CPU
 * gang stays up), then lingers: rank 0, blocked in the third all-reduce with
 * a minute's timeout, can only learn of it from the notice rank 1's gang
 * posts through its control channel. */
static int noticed(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 60000);
  float* d = dalloc(16 * sizeof(float));
  const int64_t t0 = gang_test_now_ms();
  gang_status_t s = GANG_OK;
  int i;
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  for (i = 0; i < 3 && s == GANG_OK; ++i) {
    gang_work_t* w = NULL;
    s = gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, &w);
    if (s == GANG_OK) s = gang_work_wait(w, -1);
    if (w != NULL) gang_work_destroy(w);
  }
  CHECK(s == GANG_ERR_PEER_LOST, "rank %d got %s: %s", rank, gang_status_name(s), gang_last_error());
  if (rank == 0) {
    CHECK(strstr(gang_last_error(), "another rank failed") != NULL, "not from the notice: %s",
          gang_last_error());
    CHECK(gang_test_now_ms() - t0 < 3000, "failed after %lld ms", (long long)(gang_test_now_ms() - t0));
    gang_test_shared_ints()[0] = 1;
  } else {
    CHECK(gang_test_wait_shared(0, 1, 20000) == 0, "rank 0 never failed");
  }
  gang_destroy(g);
  return 0;
}

static void test_notice(void** s) {
  const char* why = no_gpu_reason();
  (void)s;
  if (why == NULL && !on_double()) why = "faults are injected by the host double only";
  if (why != NULL) {
    print_message("skipped: %s\n", why);
    skip();
  }
  setenv("GANG_NCCL_DOUBLE_FAULT", "quiet_error:1:4", 1); /* the third after the warm-up */
  assert_int_equal(gang_test_run_procs(2, noticed, NULL, WALL_S), 0);
  unsetenv("GANG_NCCL_DOUBLE_FAULT");
}

static void* abort_later(void* g) {
  usleep(300 * 1000);
  gang_abort((gang_t*)g);
  return NULL;
}

static int aborted(int rank, int size, const char* url, void* arg) {
  gang_t* g = cuda_gang(rank, size, url, 30000);
  float* d = dalloc(16 * sizeof(float));
  (void)arg;
  CHECK(g != NULL && d != NULL, "setup");
  if (rank == 0) {
    pthread_t t;
    const int64_t t0 = gang_test_now_ms();
    gang_status_t s;
    pthread_create(&t, NULL, abort_later, g);
    /* Rank 1 never joins: only the abort can end this. */
    s = gang_all_reduce(g, d, d, 16, GANG_FLOAT32, GANG_SUM, NULL);
    pthread_join(t, NULL);
    CHECK(s == GANG_ERR_ABORTED, "got %s: %s", gang_status_name(s), gang_last_error());
    CHECK(gang_test_now_ms() - t0 < 3000, "ended after %lld ms", (long long)(gang_test_now_ms() - t0));
    gang_test_shared_ints()[0] = 1;
  } else {
    CHECK(gang_test_wait_shared(0, 1, 20000) == 0, "rank 0 never ended");
  }
  gang_destroy(g);
  return 0;
}

static void test_abort(void** s) { (void)s; run_or_skip(2, aborted); }

/* ---- unavailability ------------------------------------------------------- */

static int unavailable(int rank, int size, const char* url, void* arg) {
  const char* cause = arg;
  const int64_t t0 = gang_test_now_ms();
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t s;
  float x = 1, y = 0;
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.device_type = GANG_DEVICE_CUDA;
  s = gang_create(&o, &g);
  CHECK(s == GANG_ERR_UNAVAILABLE, "got %s: %s", gang_status_name(s), gang_last_error());
  CHECK(strstr(gang_last_error(), cause) != NULL, "message without \"%s\": %s", cause,
        gang_last_error());
  CHECK(gang_test_now_ms() - t0 < 1000, "took %lld ms", (long long)(gang_test_now_ms() - t0));
  /* A CPU gang in the same process still works. */
  o.device_type = GANG_DEVICE_CPU;
  o.backend = "gloo";
  o.name = "cpu";
  CHECK_OK(gang_create(&o, &g));
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK(y == 1, "cpu sum %g", y);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_unavailable(void** s) {
  (void)s;
  setenv("GANG_CUDA_DOUBLE_DEVICES", "0", 1);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  assert_int_equal(gang_test_run_procs(1, unavailable, "no CUDA device is visible", WALL_S), 0);
  unsetenv("GANG_CUDA_DOUBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("GANG_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  assert_int_equal(gang_test_run_procs(1, unavailable, "libnccl.so.2", WALL_S), 0);
  unsetenv("GANG_NCCL_LIBRARY");
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix_1), cmocka_unit_test(test_matrix_2),
      cmocka_unit_test(test_matrix_3), cmocka_unit_test(test_matrix_4),
      cmocka_unit_test(test_stream),   cmocka_unit_test(test_group),
      cmocka_unit_test(test_split),    cmocka_unit_test(test_remote_error),
      cmocka_unit_test(test_hang),     cmocka_unit_test(test_notice),
      cmocka_unit_test(test_abort),
      cmocka_unit_test(test_unavailable),
      cmocka_unit_test(test_late_input),
      cmocka_unit_test(test_device_guard),
      cmocka_unit_test(test_in_progress),
      cmocka_unit_test(test_teardown),
      cmocka_unit_test(test_capture),
      cmocka_unit_test(test_pooled),      cmocka_unit_test(test_completion),
      cmocka_unit_test(test_completion_device_work),
      cmocka_unit_test(test_shrink),
      cmocka_unit_test(test_gang_shrink),
  };
  if (argc > 1) {
    /* A filter that names no test would run none and pass. */
    size_t i, known = 0;
    for (i = 0; i < sizeof tests / sizeof tests[0]; ++i) known += strcmp(tests[i].name, argv[1]) == 0;
    if (known == 0) {
      fprintf(stderr, "test_nccl: no test is called %s\n", argv[1]);
      return 1;
    }
    cmocka_set_test_filter(argv[1]);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
