/* gang-bench: times one collective over a range of sizes and prints the
 * table nccl-tests prints (size, count, type, redop, root; time, algbw,
 * busbw and #wrong, out of place and in place).
 *
 *   gangrun --nproc-per-node 4 -- gang-bench -t all_reduce -b 8 -e 64M -f 4
 *
 * Every rank runs it; rank 0 prints. It creates its gang from the launch
 * environment (gangrun, torchrun, mpirun, SLURM) like any gang program, on
 * the backend --backend names ("auto" by default). The time of a size is the
 * largest over ranks of each rank's median call; algbw is the size over that
 * time, busbw algbw times nccl-tests' factor for the collective (what each
 * rank's link carries): all_reduce 2(n-1)/n; all_gather, reduce_scatter,
 * gather, scatter and all_to_all (n-1)/n; broadcast, reduce and sendrecv 1.
 * "size" is the largest buffer of a rank: the gathered whole for
 * all_gather and gather, the whole input of reduce_scatter, scatter and
 * all_to_all. Only the public API is used. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>
#include <gang/gang.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum coll {
  C_ALL_REDUCE, C_ALL_GATHER, C_REDUCE_SCATTER, C_BROADCAST, C_REDUCE,
  C_GATHER, C_SCATTER, C_ALL_TO_ALL, C_SENDRECV, C_BARRIER
} coll_t;

static const struct {
  const char* name;
  coll_t coll;
  int has_op, has_root, has_oop, has_ip;
} kColls[] = {
    {"all_reduce", C_ALL_REDUCE, 1, 0, 1, 1},
    {"all_gather", C_ALL_GATHER, 0, 0, 1, 1},
    {"reduce_scatter", C_REDUCE_SCATTER, 1, 0, 1, 1},
    {"broadcast", C_BROADCAST, 0, 1, 0, 1},
    {"reduce", C_REDUCE, 1, 1, 1, 1},
    {"gather", C_GATHER, 0, 1, 1, 1},
    {"scatter", C_SCATTER, 0, 1, 1, 1},
    {"all_to_all", C_ALL_TO_ALL, 0, 0, 1, 0},
    {"sendrecv", C_SENDRECV, 0, 0, 1, 0},
    {"barrier", C_BARRIER, 0, 0, 1, 0},
};
#define NCOLLS (sizeof kColls / sizeof kColls[0])

static const struct {
  const char* name;
  gang_dtype_t dtype;
} kDtypes[] = {
    {"int8", GANG_INT8},       {"uint8", GANG_UINT8},   {"int32", GANG_INT32},
    {"uint32", GANG_UINT32},   {"int64", GANG_INT64},   {"uint64", GANG_UINT64},
    {"half", GANG_FLOAT16},    {"bfloat16", GANG_BFLOAT16},
    {"float", GANG_FLOAT32},   {"double", GANG_FLOAT64}, {"int16", GANG_INT16},
};
static const char* kOps[] = {"sum", "prod", "min", "max", "avg"};

typedef struct config {
  size_t coll;  /* index into kColls */
  size_t min_bytes, max_bytes;
  double factor;
  size_t step_bytes; /* -i: additive steps instead of a factor */
  int iters, warmup, check, latency, json, root, bind;
  gang_dtype_t dtype;
  gang_op_t op;
  const char* backend;
  int cuda; /* --device cuda: the gang's buffers in GPU memory */
} config_t;

typedef struct stats {
  double median, avg, min, p50, p99, max;
} stats_t;

typedef struct result {
  int ran;
  stats_t t;
  double wrong;
} result_t;

static gang_t* g_gang;
/* The gang of gang-bench's own bookkeeping (timings, counts of wrong
 * elements, all in host memory): g_gang itself on CPU, a CPU gang beside it
 * with --device cuda. */
static gang_t* g_host;
static int g_rank, g_size;
static double g_wrong_total; /* every rank's wrong elements, all sizes */

#define MUST(call)                                                          \
  do {                                                                      \
    gang_status_t must_s_ = (call);                                         \
    if (must_s_ != GANG_OK) {                                               \
      fprintf(stderr, "gang-bench: rank %d: %s: %s: %s\n", g_rank, #call,   \
              gang_status_name(must_s_), gang_last_error());                \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* ---- element values, exact in every dtype ------------------------------ */

static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h >> 15) << 31;
  const int exp = (h >> 10) & 0x1f;
  const uint32_t frac = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = ldexpf((float)frac, -24);
  } else if (exp == 31) {
    v = frac ? NAN : INFINITY;
  } else {
    v = ldexpf((float)(frac | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

static uint16_t float_to_half(float f) {
  /* Exact for the small integers and halves written here; others round
   * to nearest through a float32 intermediate. */
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  float a = fabsf(f);
  int e;
  float m;
  if (a == 0) return sign;
  if (a >= 65520.0f) return sign | 0x7c00;
  m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  if (e < -13) {     /* subnormal */
    return sign | (uint16_t)lrintf(ldexpf(a, 24));
  }
  {
    long mant = lrintf(ldexpf(m, 11)); /* 1024..2048 */
    if (mant == 2048) {
      mant = 1024;
      ++e;
    }
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(mant - 1024);
  }
}

static double get_elem(const void* buf, size_t i, gang_dtype_t t) {
  switch (t) {
    case GANG_INT8: return ((const int8_t*)buf)[i];
    case GANG_UINT8: return ((const uint8_t*)buf)[i];
    case GANG_INT32: return ((const int32_t*)buf)[i];
    case GANG_UINT32: return ((const uint32_t*)buf)[i];
    case GANG_INT64: return (double)((const int64_t*)buf)[i];
    case GANG_UINT64: return (double)((const uint64_t*)buf)[i];
    case GANG_FLOAT16: return half_to_float(((const uint16_t*)buf)[i]);
    case GANG_BFLOAT16: {
      uint32_t bits = (uint32_t)((const uint16_t*)buf)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      return f;
    }
    case GANG_FLOAT32: return ((const float*)buf)[i];
    case GANG_FLOAT64: return ((const double*)buf)[i];
    case GANG_INT16: return ((const int16_t*)buf)[i];
    default: return 0;
  }
}

static void set_elem(void* buf, size_t i, gang_dtype_t t, double v) {
  switch (t) {
    case GANG_INT8: ((int8_t*)buf)[i] = (int8_t)v; break;
    case GANG_UINT8: ((uint8_t*)buf)[i] = (uint8_t)v; break;
    case GANG_INT32: ((int32_t*)buf)[i] = (int32_t)v; break;
    case GANG_UINT32: ((uint32_t*)buf)[i] = (uint32_t)v; break;
    case GANG_INT64: ((int64_t*)buf)[i] = (int64_t)v; break;
    case GANG_UINT64: ((uint64_t*)buf)[i] = (uint64_t)v; break;
    case GANG_FLOAT16: ((uint16_t*)buf)[i] = float_to_half((float)v); break;
    case GANG_BFLOAT16: {
      const float f = (float)v; /* small integers: the low half is zero */
      uint32_t bits;
      memcpy(&bits, &f, sizeof bits);
      ((uint16_t*)buf)[i] = (uint16_t)(bits >> 16);
      break;
    }
    case GANG_FLOAT32: ((float*)buf)[i] = (float)v; break;
    case GANG_FLOAT64: ((double*)buf)[i] = v; break;
    case GANG_INT16: ((int16_t*)buf)[i] = (int16_t)v; break;
    default: break;
  }
}

/* What rank r contributes at element j. Sums of up to 31 ranks stay below
 * 128, so even int8 and bfloat16 hold every result exactly; for PROD only
 * rank 0 differs from 1. */
static double value(const config_t* c, int r, size_t j) {
  if (c->op == GANG_PROD && kColls[c->coll].has_op) {
    return r == 0 ? (double)(1 + j % 3) : 1.0;
  }
  return (double)(1 + (size_t)(r + (int)(j % 4)) % 4);
}

static double reduced(const config_t* c, size_t j) {
  double acc = value(c, 0, j);
  int r;
  for (r = 1; r < g_size; ++r) {
    const double v = value(c, r, j);
    switch (c->op) {
      case GANG_PROD: acc *= v; break;
      case GANG_MIN: acc = v < acc ? v : acc; break;
      case GANG_MAX: acc = v > acc ? v : acc; break;
      default: acc += v; break;
    }
  }
  if (c->op == GANG_AVG) acc /= g_size; /* floating types only */
  return acc;
}

static int same(double got, double want, gang_dtype_t t) {
  const double tol = t == GANG_FLOAT16 || t == GANG_BFLOAT16 ? 1e-2 : 1e-6;
  return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

/* ---- one collective ---------------------------------------------------- */

typedef struct bufs {
  void* send;
  void* recv;
  size_t count; /* elements of the collective's "size" */
  size_t chunk; /* elements per rank where the collective splits */
  /* --device cuda: the GPU's copies of send and recv (bytes each), which
   * the collectives use; send and recv stay the host's for filling and
   * checking. */
  void* dsend;
  void* drecv;
  size_t bytes;
} bufs_t;

/* ---- CUDA, for --device cuda: the runtime the NCCL module loaded ---------- */

#define MEMCPY_DEFAULT 4 /* cudaMemcpyDefault */

static struct {
  int (*SetDevice)(int);
  int (*Malloc)(void**, size_t);
  int (*Memcpy)(void*, const void*, size_t, int);
  int (*DeviceSynchronize)(void);
} cu;

/* Loads the CUDA runtime (the one already in the process first); 0 if it
 * has what gang-bench calls. */
static int load_cuda(void) {
  static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  void* lib = NULL;
  size_t i;
  for (i = 0; i < 3 && lib == NULL; ++i) lib = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
  for (i = 0; i < 3 && lib == NULL; ++i) lib = dlopen(names[i], RTLD_NOW);
  if (lib == NULL) return -1;
  *(void**)&cu.SetDevice = dlsym(lib, "cudaSetDevice");
  *(void**)&cu.Malloc = dlsym(lib, "cudaMalloc");
  *(void**)&cu.Memcpy = dlsym(lib, "cudaMemcpy");
  *(void**)&cu.DeviceSynchronize = dlsym(lib, "cudaDeviceSynchronize");
  return cu.SetDevice && cu.Malloc && cu.Memcpy && cu.DeviceSynchronize ? 0 : -1;
}

/* A CUDA call that must succeed, else the rank says which and exits. */
#define CUDA_MUST(call)                                                          \
  do {                                                                           \
    const int cuda_must_e_ = (call);                                             \
    if (cuda_must_e_ != 0) {                                                     \
      fprintf(stderr, "gang-bench: rank %d: %s: CUDA error %d\n", g_rank, #call, \
              cuda_must_e_);                                                     \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

/* Host buffers to the GPU (after prepare) and back (before checking). */
static void upload(const config_t* c, bufs_t* b) {
  if (!c->cuda) return;
  CUDA_MUST(cu.Memcpy(b->dsend, b->send, b->bytes, MEMCPY_DEFAULT));
  CUDA_MUST(cu.Memcpy(b->drecv, b->recv, b->bytes, MEMCPY_DEFAULT));
}

static void download(const config_t* c, bufs_t* b) {
  if (!c->cuda) return;
  CUDA_MUST(cu.DeviceSynchronize());
  CUDA_MUST(cu.Memcpy(b->send, b->dsend, b->bytes, MEMCPY_DEFAULT));
  CUDA_MUST(cu.Memcpy(b->recv, b->drecv, b->bytes, MEMCPY_DEFAULT));
}

/* Fills the send side for a run (in place: the part of recv that is the
 * input), and poisons the output. */
static void prepare(const config_t* c, bufs_t* b, int in_place) {
  const coll_t k = kColls[c->coll].coll;
  const gang_dtype_t t = c->dtype;
  const size_t es = gang_dtype_size(t);
  size_t j;
  memset(b->recv, 0xff, b->count * es);
  switch (k) {
    case C_ALL_REDUCE:
    case C_REDUCE:
    case C_BROADCAST:
      for (j = 0; j < b->count; ++j) {
        set_elem(in_place || k == C_BROADCAST ? b->recv : b->send, j, t,
                 value(c, g_rank, j));
      }
      break;
    case C_ALL_GATHER:
    case C_GATHER: {
      char* dst = in_place ? (char*)b->recv + (size_t)g_rank * b->chunk * es
                           : (char*)b->send;
      for (j = 0; j < b->chunk; ++j) set_elem(dst, j, t, value(c, g_rank, j));
      break;
    }
    case C_REDUCE_SCATTER:
    case C_SCATTER:
    case C_ALL_TO_ALL:
      for (j = 0; j < b->count; ++j) set_elem(b->send, j, t, value(c, g_rank, j));
      break;
    case C_SENDRECV:
      for (j = 0; j < b->count; ++j) set_elem(b->send, j, t, value(c, g_rank, j));
      break;
    case C_BARRIER:
      break;
  }
}

static void issue(const config_t* c, bufs_t* b, int in_place) {
  const coll_t k = kColls[c->coll].coll;
  const gang_dtype_t t = c->dtype;
  const size_t es = gang_dtype_size(t);
  char* send = c->cuda ? b->dsend : b->send;
  char* recv = c->cuda ? b->drecv : b->recv;
  const int root = c->root;
  switch (k) {
    case C_ALL_REDUCE:
      MUST(gang_all_reduce(g_gang, in_place ? recv : send, recv, b->count, t, c->op, NULL));
      break;
    case C_REDUCE:
      MUST(gang_reduce(g_gang, in_place ? recv : send, recv, b->count, t, c->op, root, NULL));
      break;
    case C_BROADCAST:
      MUST(gang_broadcast(g_gang, recv, b->count, t, root, NULL));
      break;
    case C_ALL_GATHER:
      MUST(gang_all_gather(g_gang, in_place ? recv + (size_t)g_rank * b->chunk * es : send,
                           recv, b->chunk, t, NULL));
      break;
    case C_GATHER:
      MUST(gang_gather(g_gang,
                       in_place && g_rank == root ? recv + (size_t)root * b->chunk * es : send,
                       recv, b->chunk, t, root, NULL));
      break;
    case C_REDUCE_SCATTER:
      MUST(gang_reduce_scatter(g_gang, send,
                               in_place ? send + (size_t)g_rank * b->chunk * es : recv,
                               b->chunk, t, c->op, NULL));
      break;
    case C_SCATTER:
      MUST(gang_scatter(g_gang, send,
                        in_place && g_rank == root ? send + (size_t)root * b->chunk * es : recv,
                        b->chunk, t, root, NULL));
      break;
    case C_ALL_TO_ALL:
      MUST(gang_all_to_all(g_gang, send, recv, b->chunk, t, NULL));
      break;
    case C_SENDRECV:
      MUST(gang_group_start(g_gang));
      MUST(gang_send(g_gang, send, b->count, t, (g_rank + 1) % g_size, 0, NULL));
      MUST(gang_recv(g_gang, recv, b->count, t, (g_rank + g_size - 1) % g_size, 0, NULL));
      MUST(gang_group_end(g_gang, NULL));
      break;
    case C_BARRIER:
      MUST(gang_barrier(g_gang, NULL));
      break;
  }
}

/* Elements of this rank's output that differ from what they must be. */
static size_t count_wrong(const config_t* c, const bufs_t* b, int in_place) {
  const coll_t k = kColls[c->coll].coll;
  const gang_dtype_t t = c->dtype;
  const size_t es = gang_dtype_size(t);
  size_t wrong = 0, j;
  int p;
  switch (k) {
    case C_ALL_REDUCE:
    case C_REDUCE:
      if (k == C_REDUCE && g_rank != c->root) break;
      for (j = 0; j < b->count; ++j) wrong += !same(get_elem(b->recv, j, t), reduced(c, j), t);
      break;
    case C_BROADCAST:
      for (j = 0; j < b->count; ++j) wrong += !same(get_elem(b->recv, j, t), value(c, c->root, j), t);
      break;
    case C_ALL_GATHER:
    case C_GATHER:
      if (k == C_GATHER && g_rank != c->root) break;
      for (p = 0; p < g_size; ++p) {
        for (j = 0; j < b->chunk; ++j) {
          wrong += !same(get_elem(b->recv, (size_t)p * b->chunk + j, t), value(c, p, j), t);
        }
      }
      break;
    case C_REDUCE_SCATTER: {
      const char* out = in_place ? (const char*)b->send + (size_t)g_rank * b->chunk * es
                                 : (const char*)b->recv;
      for (j = 0; j < b->chunk; ++j) {
        wrong += !same(get_elem(out, j, t), reduced(c, (size_t)g_rank * b->chunk + j), t);
      }
      break;
    }
    case C_SCATTER: {
      const char* out = in_place && g_rank == c->root
                            ? (const char*)b->send + (size_t)g_rank * b->chunk * es
                            : (const char*)b->recv;
      for (j = 0; j < b->chunk; ++j) {
        wrong += !same(get_elem(out, j, t), value(c, c->root, (size_t)g_rank * b->chunk + j), t);
      }
      break;
    }
    case C_ALL_TO_ALL:
      for (p = 0; p < g_size; ++p) {
        for (j = 0; j < b->chunk; ++j) {
          wrong += !same(get_elem(b->recv, (size_t)p * b->chunk + j, t),
                         value(c, p, (size_t)g_rank * b->chunk + j), t);
        }
      }
      break;
    case C_SENDRECV: {
      const int from = (g_rank + g_size - 1) % g_size;
      for (j = 0; j < b->count; ++j) wrong += !same(get_elem(b->recv, j, t), value(c, from, j), t);
      break;
    }
    case C_BARRIER:
      break;
  }
  return wrong;
}

/* ---- timing -------------------------------------------------------------- */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Wall-clock time, comparable between the ranks of one host. */
static double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The largest over ranks of each of this rank's statistics (the smallest
 * for min). */
static stats_t over_ranks(double* samples, int n) {
  stats_t s;
  double local[6], global[6], sum = 0;
  int i;
  qsort(samples, (size_t)n, sizeof *samples, by_value);
  for (i = 0; i < n; ++i) sum += samples[i];
  local[0] = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  local[1] = sum / n;
  local[2] = -samples[0];
  local[3] = local[0];
  local[4] = samples[(size_t)((n - 1) * 0.99 + 0.5)];
  local[5] = samples[n - 1];
  MUST(gang_all_reduce(g_host, local, global, 6, GANG_FLOAT64, GANG_MAX, NULL));
  s.median = global[0];
  s.avg = global[1];
  s.min = -global[2];
  s.p50 = global[3];
  s.p99 = global[4];
  s.max = global[5];
  return s;
}

static result_t run(const config_t* c, bufs_t* b, int in_place, double* samples) {
  result_t r;
  double wrong = 0;
  int i;
  memset(&r, 0, sizeof r);
  r.ran = 1;
  prepare(c, b, in_place);
  upload(c, b);
  for (i = 0; i < c->warmup; ++i) issue(c, b, in_place);
  for (i = 0; i < c->iters; ++i) {
    double t0;
    if (c->check && i == c->iters - 1) {
      prepare(c, b, in_place);
      upload(c, b);
    }
    t0 = now_us();
    issue(c, b, in_place);
    samples[i] = now_us() - t0;
  }
  r.t = over_ranks(samples, c->iters);
  if (c->check) download(c, b);
  if (c->check) {
    /* The last call ran on freshly prepared buffers (warm-up and the other
     * timed calls may have reduced into their own inputs). */
    const double mine = (double)count_wrong(c, b, in_place);
    MUST(gang_all_reduce(g_host, &mine, &wrong, 1, GANG_FLOAT64, GANG_SUM, NULL));
  }
  r.wrong = c->check ? wrong : -1;
  if (c->check) g_wrong_total += wrong;
  return r;
}

static double bus_factor(coll_t k) {
  const double n = g_size;
  switch (k) {
    case C_ALL_REDUCE: return 2 * (n - 1) / n;
    case C_ALL_GATHER:
    case C_REDUCE_SCATTER:
    case C_GATHER:
    case C_SCATTER:
    case C_ALL_TO_ALL: return (n - 1) / n;
    default: return 1;
  }
}

/* ---- arguments ------------------------------------------------------------ */

static void usage(FILE* f) {
  fprintf(f,
      "usage: gang-bench [options]   (run on every rank, e.g. under gangrun)\n"
      "  -t, --coll NAME     all_reduce (default), all_gather, reduce_scatter,\n"
      "                      broadcast, reduce, gather, scatter, all_to_all,\n"
      "                      sendrecv, barrier\n"
      "  -b, --minbytes N    smallest size (default 8; K, M, G suffixes)\n"
      "  -e, --maxbytes N    largest size (default 64M)\n"
      "  -f, --stepfactor F  multiply the size by F (default 2)\n"
      "  -i, --stepbytes N   or add N bytes per step\n"
      "  -n, --iters N       timed calls per size (default 20)\n"
      "  -w, --warmup N      untimed calls first (default 5)\n"
      "  -d, --datatype T    int8 uint8 int32 uint32 int64 uint64 int16 half bfloat16\n"
      "                      float (default) double\n"
      "  -o, --op OP         sum (default) prod min max avg\n"
      "  -r, --root N        root of rooted collectives (default 0)\n"
      "  -c, --check 0|1     check every result (default 1)\n"
      "      --latency       also print avg, min, p50, p99 and max per size\n"
      "      --bind          pin each rank to one core (its local rank modulo the\n"
      "                      cores), as mpirun binds its ranks by default\n"
      "      --json          print JSON instead of the table\n"
      "      --backend NAME  the gang's backend (default auto)\n"
      "      --device cpu|cuda  where the buffers live (default cpu; cuda: GPU\n"
      "                      memory of the gang's device, NCCL by default)\n");
}

static size_t parse_size(const char* s, int* ok) {
  char* end = NULL;
  double v = strtod(s, &end);
  size_t mult = 1;
  if (end == s || v < 0) {
    *ok = 0;
    return 0;
  }
  if (*end == 'K' || *end == 'k') mult = (size_t)1 << 10;
  if (*end == 'M' || *end == 'm') mult = (size_t)1 << 20;
  if (*end == 'G' || *end == 'g') mult = (size_t)1 << 30;
  if (mult != 1) ++end;
  if (*end != '\0') *ok = 0;
  return (size_t)(v * (double)mult);
}

static int parse_args(int argc, char** argv, config_t* c) {
  int i, ok = 1;
  size_t k;
  memset(c, 0, sizeof *c);
  c->min_bytes = 8;
  c->max_bytes = (size_t)64 << 20;
  c->factor = 2;
  c->iters = 20;
  c->warmup = 5;
  c->check = 1;
  c->dtype = GANG_FLOAT32;
  c->op = GANG_SUM;
  c->backend = "auto";
  for (i = 1; i < argc && ok; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--latency")) {
      c->latency = 1;
      takes = 0;
    } else if (!strcmp(a, "--bind")) {
      c->bind = 1;
      takes = 0;
    } else if (!strcmp(a, "--json")) {
      c->json = 1;
      takes = 0;
    } else if (v == NULL) {
      fprintf(stderr, "gang-bench: %s needs a value\n", a);
      return -1;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--coll")) {
      for (k = 0; k < NCOLLS && strcmp(kColls[k].name, v); ++k) {
      }
      if (k == NCOLLS) {
        fprintf(stderr, "gang-bench: unknown collective \"%s\"\n", v);
        return -1;
      }
      c->coll = k;
    } else if (!strcmp(a, "-b") || !strcmp(a, "--minbytes")) {
      c->min_bytes = parse_size(v, &ok);
    } else if (!strcmp(a, "-e") || !strcmp(a, "--maxbytes")) {
      c->max_bytes = parse_size(v, &ok);
    } else if (!strcmp(a, "-f") || !strcmp(a, "--stepfactor")) {
      c->factor = atof(v);
      ok = c->factor > 1;
    } else if (!strcmp(a, "-i") || !strcmp(a, "--stepbytes")) {
      c->step_bytes = parse_size(v, &ok);
      ok = ok && c->step_bytes > 0;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--iters")) {
      c->iters = atoi(v);
      ok = c->iters > 0;
    } else if (!strcmp(a, "-w") || !strcmp(a, "--warmup")) {
      c->warmup = atoi(v);
      ok = c->warmup >= 0;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--check")) {
      c->check = atoi(v) != 0;
    } else if (!strcmp(a, "-r") || !strcmp(a, "--root")) {
      c->root = atoi(v);
    } else if (!strcmp(a, "--backend")) {
      c->backend = v;
    } else if (!strcmp(a, "--device")) {
      if (strcmp(v, "cuda") != 0 && strcmp(v, "cpu") != 0) {
        fprintf(stderr, "gang-bench: --device takes cpu or cuda, not %s\n", v);
        return 2;
      }
      c->cuda = strcmp(v, "cuda") == 0;
    } else if (!strcmp(a, "-d") || !strcmp(a, "--datatype")) {
      for (k = 0; k < sizeof kDtypes / sizeof kDtypes[0] && strcmp(kDtypes[k].name, v); ++k) {
      }
      if (k == sizeof kDtypes / sizeof kDtypes[0]) {
        fprintf(stderr, "gang-bench: unknown datatype \"%s\"\n", v);
        return -1;
      }
      c->dtype = kDtypes[k].dtype;
    } else if (!strcmp(a, "-o") || !strcmp(a, "--op")) {
      for (k = 0; k < 5 && strcmp(kOps[k], v); ++k) {
      }
      if (k == 5) {
        fprintf(stderr, "gang-bench: unknown op \"%s\"\n", v);
        return -1;
      }
      c->op = (gang_op_t)k;
    } else {
      fprintf(stderr, "gang-bench: unknown option %s (see --help)\n", a);
      return -1;
    }
    if (!ok) fprintf(stderr, "gang-bench: bad value \"%s\" for %s\n", v, a);
    i += takes;
  }
  if (ok && c->min_bytes > c->max_bytes) {
    fprintf(stderr, "gang-bench: -b is larger than -e\n");
    ok = 0;
  }
  return ok ? 0 : -1;
}

static const char* dtype_name(gang_dtype_t t) {
  size_t k;
  for (k = 0; k < sizeof kDtypes / sizeof kDtypes[0]; ++k) {
    if (kDtypes[k].dtype == t) return kDtypes[k].name;
  }
  return "?";
}

/* ---- output ---------------------------------------------------------------- */

static void print_half(const result_t* r, size_t bytes, double factor) {
  if (!r->ran) {
    printf(" %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  {
    const double algbw = r->t.median > 0 ? (double)bytes / r->t.median / 1e3 : 0;
    printf(" %8.1f %7.2f %7.2f", r->t.median, algbw, algbw * factor);
    if (r->wrong < 0) {
      printf(" %6s", "N/A");
    } else {
      printf(" %6.0f", r->wrong);
    }
  }
}

static void json_half(const char* name, const result_t* r, size_t bytes, double factor) {
  const double algbw = r->ran && r->t.median > 0 ? (double)bytes / r->t.median / 1e3 : 0;
  if (!r->ran) {
    printf("\"%s\": null", name);
    return;
  }
  printf("\"%s\": {\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, "
         "\"wrong\": %.0f, \"avg_us\": %.3f, \"min_us\": %.3f, \"p50_us\": %.3f, "
         "\"p99_us\": %.3f, \"max_us\": %.3f}",
         name, r->t.median, algbw, algbw * factor, r->wrong, r->t.avg, r->t.min,
         r->t.p50, r->t.p99, r->t.max);
}

int main(int argc, char** argv) {
  config_t c;
  gang_options_t options = GANG_OPTIONS_INITIALIZER;
  const size_t one = 1;
  size_t bytes, es, max_elems;
  double* samples;
  bufs_t b;
  int first = 1;
  if (parse_args(argc, argv, &c) != 0) return 2;
  options.backend = c.backend;
  if (c.cuda) {
    options.device_type = GANG_DEVICE_CUDA;
    if (load_cuda() != 0) {
      fprintf(stderr, "gang-bench: --device cuda: the CUDA runtime cannot be loaded\n");
      return 2;
    }
  }
  /* Creation time: from the last rank's call to the last rank's return
   * (launch skew left out), and from the first call. */
  double created[3];
  created[0] = wall_us();
  created[1] = -created[0];
  MUST(gang_create(&options, &g_gang));
  created[2] = wall_us();
  g_rank = gang_rank(g_gang);
  g_size = gang_size(g_gang);
  if (c.bind) {
    /* The local rank from the launcher, else the rank (one host). */
    const char* local = getenv("GANG_LOCAL_RANK");
    if (local == NULL) local = getenv("LOCAL_RANK");
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)((local ? atoi(local) : g_rank) % (cores > 0 ? cores : 1)), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) perror("gang-bench: --bind");
  }
  g_host = g_gang;
  if (c.cuda) {
    gang_options_t host = GANG_OPTIONS_INITIALIZER;
    host.name = "gang-bench-host";
    MUST(gang_create(&host, &g_host));
  }
  MUST(gang_all_reduce(g_host, created, created, 3, GANG_FLOAT64, GANG_MAX, NULL));
  const double create_ms = (created[2] - created[0]) / 1e3;
  const double create_first_ms = (created[2] + created[1]) / 1e3;
  if (c.root < 0 || c.root >= g_size) {
    if (g_rank == 0) fprintf(stderr, "gang-bench: root %d is not a rank of %d\n", c.root, g_size);
    return 2;
  }
  if (kColls[c.coll].has_op && !gang_supports(g_gang, c.op, c.dtype)) {
    if (g_rank == 0) {
      fprintf(stderr, "gang-bench: the %s backend does not reduce %s with %s%s\n",
              gang_backend_name(g_gang), dtype_name(c.dtype), kOps[c.op],
              c.op == GANG_AVG ? " (gang averages floating types only)" : "");
    }
    /* Every rank gets here: none exits before rank 0 has said why. */
    MUST(gang_barrier(g_gang, NULL));
    return 2;
  }
  es = gang_dtype_size(c.dtype);
  /* Room for the largest size, rounded up to whole chunks of every rank. */
  max_elems = (c.max_bytes / es + (size_t)g_size) / (size_t)g_size * (size_t)g_size;
  b.send = calloc(max_elems ? max_elems : one, es);
  b.recv = calloc(max_elems ? max_elems : one, es);
  samples = calloc((size_t)c.iters, sizeof *samples);
  b.bytes = (max_elems ? max_elems : one) * es;
  b.dsend = b.drecv = NULL;
  if (c.cuda) {
    CUDA_MUST(cu.SetDevice(gang_device_index(g_gang)));
    CUDA_MUST(cu.Malloc(&b.dsend, b.bytes));
    CUDA_MUST(cu.Malloc(&b.drecv, b.bytes));
  }
  if (!b.send || !b.recv || !samples) {
    fprintf(stderr, "gang-bench: out of memory for %zu bytes\n", max_elems * es);
    return 1;
  }
  if (g_rank == 0 && !c.json) {
    printf("# gang-bench: %s, %d ranks, backend %s%s, %s, %s, %d iterations, "
           "%d warm-up\n", kColls[c.coll].name, g_size, gang_backend_name(g_gang),
           c.cuda ? " (GPU memory)" : "",
           dtype_name(c.dtype), kColls[c.coll].has_op ? kOps[c.op] : "no op",
           c.iters, c.warmup);
    printf("# gang created in %.1f ms after the last rank called gang_create "
           "(%.1f ms after the first)\n#\n", create_ms, create_first_ms);
    printf("# %10s %12s %8s %6s %5s %34s %34s\n", "", "", "", "", "",
           "out-of-place                 ", "in-place                  ");
    printf("# %10s %12s %8s %6s %5s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
           "time", "algbw", "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %5s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
           "(GB/s)", "(GB/s)", "");
  }
  if (g_rank == 0 && c.json) {
    printf("{\"collective\": \"%s\", \"ranks\": %d, \"backend\": \"%s\", "
           "\"dtype\": \"%s\", \"op\": \"%s\", \"iters\": %d, \"warmup\": %d, "
           "\"create_ms\": %.3f, \"create_from_first_ms\": %.3f, "
           "\"results\": [\n", kColls[c.coll].name, g_size,
           gang_backend_name(g_gang), dtype_name(c.dtype), kOps[c.op], c.iters,
           c.warmup, create_ms, create_first_ms);
  }
  for (bytes = c.min_bytes; bytes <= c.max_bytes;) {
    const coll_t k = kColls[c.coll].coll;
    const int splits = k == C_ALL_GATHER || k == C_GATHER || k == C_REDUCE_SCATTER ||
                       k == C_SCATTER || k == C_ALL_TO_ALL;
    result_t oop, ip;
    size_t shown;
    memset(&oop, 0, sizeof oop);
    memset(&ip, 0, sizeof ip);
    b.chunk = splits ? bytes / es / (size_t)g_size : bytes / es;
    b.count = splits ? b.chunk * (size_t)g_size : b.chunk;
    if (k == C_BARRIER) b.count = b.chunk = 0;
    shown = b.count * es;
    if (kColls[c.coll].has_oop) oop = run(&c, &b, 0, samples);
    if (kColls[c.coll].has_ip) ip = run(&c, &b, 1, samples);
    if (g_rank == 0 && !c.json) {
      printf("  %10zu %12zu %8s %6s %5d", shown, b.count, dtype_name(c.dtype),
             kColls[c.coll].has_op ? kOps[c.op] : "none",
             kColls[c.coll].has_root ? c.root : -1);
      print_half(&oop, shown, bus_factor(k));
      print_half(&ip, shown, bus_factor(k));
      printf("\n");
      if (c.latency) {
        const result_t* r = oop.ran ? &oop : &ip;
        printf("  %10s latency (us): avg %.1f  min %.1f  p50 %.1f  p99 %.1f  max %.1f\n",
               "", r->t.avg, r->t.min, r->t.p50, r->t.p99, r->t.max);
      }
      fflush(stdout);
    }
    if (g_rank == 0 && c.json) {
      printf("%s  {\"size\": %zu, \"count\": %zu, ", first ? "" : ",\n", shown, b.count);
      json_half("out_of_place", &oop, shown, bus_factor(k));
      printf(", ");
      json_half("in_place", &ip, shown, bus_factor(k));
      printf("}");
      first = 0;
    }
    if (c.step_bytes) {
      bytes += c.step_bytes;
    } else {
      const size_t next = (size_t)((double)bytes * c.factor);
      bytes = next > bytes ? next : bytes + 1;
    }
  }
  if (g_rank == 0 && c.json) printf("\n]}\n");
  if (g_rank == 0 && g_wrong_total > 0) {
    fprintf(stderr, "gang-bench: %.0f wrong elements\n", g_wrong_total);
  }
  if (g_host != g_gang) MUST(gang_destroy(g_host));
  MUST(gang_destroy(g_gang));
  free(b.send);
  free(b.recv);
  free(samples);
  return g_wrong_total > 0 ? 1 : 0;
}
