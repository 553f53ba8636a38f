/*
 * nccl_double_bench.c - the NCCL module's host costs on the host double of
 * CUDA and NCCL, on one rank: what it adds per operation, not what a GPU
 * does. Run with the double first on LD_LIBRARY_PATH (build/tests/nccl/
 * double), as .ci/run does:
 *
 *   LD_LIBRARY_PATH=build/tests/nccl/double build/bench/nccl_double_bench
 *
 * For each of two doubles, one whose non-blocking communicators never say
 * ncclInProgress and one that always does (from a launch thread, as NCCL
 * 2.23+), it prints the median of:
 * - blocking: a 4-byte blocking all-reduce, call to return;
 * - enqueue: the host time of a blocking all-reduce in stream completion
 *   (gang_set_cuda_completion: it returns once the result is ordered on the
 *   stream, so this is the cost of enqueueing it; a module without that mode
 *   waits for the device here), and the double's own launch for comparison:
 *   ncclAllReduce on a
 *   communicator of the bench's own, polled with ncclCommGetAsyncError
 *   until it is no longer in progress; post - launch is what the module
 *   and gang's core add;
 * - seen: from the moment the work before it on the stream ends to the
 *   return of a blocking all-reduce queued behind it.
 * Each figure is the smallest median of 5 consecutive runs (see
 * settled_us). A third row runs the in-progress double with
 * GANG_NCCL_BLOCKING=1 (blocking communicators, which never say
 * ncclInProgress). Then the ratios of blocking calls to the never double's.
 * Each mode runs in a child process (the double reads its mode once).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gang/gang.h>
#include <nccl.h>

#define N 3000

static struct {
  int (*LaunchHostFunc)(void*, void (*)(void*), void*);
  int (*StreamCreate)(void**);
  int (*StreamSynchronize)(void*);
  int (*Malloc)(void**, size_t);
  int (*SetDevice)(int);
} cu;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return x < y ? -1 : x > y;
}

static double median_us(int64_t* v, int n) {
  qsort(v, (size_t)n, sizeof v[0], cmp);
  return (double)v[n / 2] / 1000.0;
}

/* The smallest of the medians of 5 runs of consecutive samples: the
 * double's threads share 2 cores with everything else, and a phase in which
 * the scheduler keeps them apart says nothing of the module. */
static double settled_us(int64_t* v, int n) {
  double best = 1e30;
  int r;
  for (r = 0; r < 5; ++r) {
    const double m = median_us(v + r * (n / 5), n / 5);
    if (m < best) best = m;
  }
  return best;
}

/* ncclAllReduce of 1 float on a 1-rank non-blocking communicator of the
 * double, polled until settled: the double's own cost of a launch (µs). */
static double raw_launch_us(float* d, void* s) {
  static int64_t t[N];
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  ncclResult_t (*get_id)(ncclUniqueId*);
  ncclResult_t (*init)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  ncclResult_t (*poll)(ncclComm_t, ncclResult_t*);
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             void*);
  ncclResult_t (*destroy)(ncclComm_t);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t state = ncclInProgress;
  int i;
  if (lib == NULL) return -1;
  *(void**)&get_id = dlsym(lib, "ncclGetUniqueId");
  *(void**)&init = dlsym(lib, "ncclCommInitRankConfig");
  *(void**)&poll = dlsym(lib, "ncclCommGetAsyncError");
  *(void**)&all_reduce = dlsym(lib, "ncclAllReduce");
  *(void**)&destroy = dlsym(lib, "ncclCommDestroy");
  config.blocking = 0;
  if (get_id(&id) != ncclSuccess) return -1;
  init(&comm, 1, id, 0, &config);
  while (poll(comm, &state) == ncclSuccess && state == ncclInProgress) {
  }
  for (i = 0; i < N; ++i) {
    const int64_t t0 = now_ns();
    if (all_reduce(d, d, 1, ncclFloat32, ncclSum, comm, s) == ncclInProgress) {
      while (poll(comm, &state) == ncclSuccess && state == ncclInProgress) {
      }
    }
    t[i] = now_ns() - t0;
  }
  cu.StreamSynchronize(s);
  destroy(comm);
  return settled_us(t, N);
}

static volatile int64_t stamp;
static void pause_then_stamp(void* p) {
  const int64_t until = now_ns() + 100000; /* 100 us of "kernel" */
  (void)p;
  while (now_ns() < until) {
  }
  stamp = now_ns();
}

/* One mode's figures: blocking, post, launch, seen (µs). */
static int measure(double out[4]) {
  static int64_t t[N];
  void* lib = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
  gang_options_t o;
  gang_t* g = NULL;
  float* d = NULL;
  void* s = NULL;
  int i;
  if (lib == NULL) {
    fprintf(stderr, "nccl_double_bench: %s (run with the double on LD_LIBRARY_PATH)\n", dlerror());
    return 1;
  }
  *(void**)&cu.LaunchHostFunc = dlsym(lib, "cudaLaunchHostFunc");
  *(void**)&cu.StreamCreate = dlsym(lib, "cudaStreamCreate");
  *(void**)&cu.StreamSynchronize = dlsym(lib, "cudaStreamSynchronize");
  *(void**)&cu.Malloc = dlsym(lib, "cudaMalloc");
  *(void**)&cu.SetDevice = dlsym(lib, "cudaSetDevice");
  gang_options_init(&o);
  o.rank = 0;
  o.size = 1;
  o.device_type = GANG_DEVICE_CUDA;
  o.device_index = 0;
  o.backend = "nccl";
  if (gang_create(&o, &g) != GANG_OK) {
    fprintf(stderr, "nccl_double_bench: %s\n", gang_last_error());
    return 1;
  }
  cu.SetDevice(0);
  cu.Malloc((void**)&d, 64);
  cu.StreamCreate(&s);
  for (i = 0; i < 200; ++i) gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL);
  for (i = 0; i < N; ++i) {
    const int64_t t0 = now_ns();
    gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL);
    t[i] = now_ns() - t0;
  }
  out[0] = settled_us(t, N);
  gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_STREAM);
  for (i = 0; i < N; ++i) {
    const int64_t t0 = now_ns();
    gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL);
    t[i] = now_ns() - t0;
    if (i % 64 == 63) cu.StreamSynchronize(NULL); /* keep the queue short */
  }
  cu.StreamSynchronize(NULL);
  gang_set_cuda_completion(g, GANG_CUDA_COMPLETION_HOST);
  out[1] = settled_us(t, N);
  out[2] = raw_launch_us(d, s);
  gang_set_cuda_stream(g, s);
  for (i = 0; i < N / 3; ++i) {
    cu.LaunchHostFunc(s, pause_then_stamp, NULL);
    gang_all_reduce(g, d, d, 1, GANG_FLOAT32, GANG_SUM, NULL);
    t[i] = now_ns() - stamp;
  }
  out[3] = settled_us(t, N / 3);
  gang_destroy(g);
  return 0;
}

static int run_mode(const char* mode, int blocking, double out[4]) {
  int fds[2];
  pid_t pid;
  int status = 0;
  if (pipe(fds) != 0) return 1;
  pid = fork();
  if (pid == 0) {
    double v[4];
    close(fds[0]);
    setenv("GANG_NCCL_DOUBLE_INPROGRESS", mode, 1);
    if (blocking) setenv("GANG_NCCL_BLOCKING", "1", 1);
    if (measure(v) != 0) _exit(1);
    if (write(fds[1], v, sizeof v) != (ssize_t)sizeof v) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  if (pid < 0 || read(fds[0], out, 4 * sizeof(double)) != (ssize_t)(4 * sizeof(double))) {
    close(fds[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    return 1;
  }
  close(fds[0]);
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(void) {
  double never[4], always[4], blocking[4];
  if (run_mode("never", 0, never) != 0 || run_mode("always", 0, always) != 0 ||
      run_mode("always", 1, blocking) != 0) {
    return 1;
  }
  printf("NCCL module on the host double, 1 rank, 4-byte float32 all-reduce, us "
         "(best median of 5 runs of %d)\n", N / 5);
  printf("%-26s %10s %10s %10s %10s\n", "double", "blocking", "enqueue", "launch", "seen");
  printf("%-26s %10.1f %10.1f %10.1f %10.1f\n", "never ncclInProgress", never[0], never[1],
         never[2], never[3]);
  printf("%-26s %10.1f %10.1f %10.1f %10.1f\n", "always ncclInProgress", always[0], always[1],
         always[2], always[3]);
  printf("%-26s %10.1f %10.1f %10.1f %10.1f\n", "GANG_NCCL_BLOCKING=1", blocking[0],
         blocking[1], blocking[2], blocking[3]);
  printf("blocking, in progress / never: %.2fx (target <= 2x); with blocking communicators "
         "(never in progress): %.2fx\n", always[0] / never[0], blocking[0] / never[0]);
  printf("host overhead per enqueue above the double's launch: %.1f us never, %.1f us in progress "
         "(target <= 10 us)\n", never[1] - never[2], always[1] - always[2]);
  printf("completion seen after the stream's work: %.1f us never, %.1f us in progress "
         "(target <= 50 us)\n", never[3], always[3]);
  return 0;
}
