/*
 * overhead.c - times a blocking 8-byte all-reduce (one double, SUM) through
 * the C API: the reference for the bindings' per-call overhead. Run it on 2
 * ranks (see bindings/bench_overhead.sh); rank 0 prints the mean time per
 * call in microseconds, or with GANG_BENCH_MEDIAN set the median of the
 * calls' times (over TCP, a few calls of milliseconds would swamp the mean).
 * With GANG_BENCH_FAKE set it times a fake gang of 2 instead (one process,
 * no traffic): the cost of the call itself. GANG_BENCH_BACKEND names the
 * backend (default: auto); GANG_BENCH_COLL=all_gather, reduce_scatter,
 * broadcast (from rank 0) or barrier times that collective of one double a
 * rank instead (all_reduce: the default).
 *
 *   overhead_c [iterations [warmup]]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gang/gang.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The timed call: GANG_BENCH_COLL's collective of one double a rank. */
static gang_status_t call(gang_t* g, const char* coll, double* x, double* all) {
  if (coll == NULL || strcmp(coll, "all_reduce") == 0) {
    return gang_all_reduce(g, x, x, 1, GANG_FLOAT64, GANG_SUM, NULL);
  }
  if (strcmp(coll, "all_gather") == 0) return gang_all_gather(g, x, all, 1, GANG_FLOAT64, NULL);
  if (strcmp(coll, "reduce_scatter") == 0) {
    return gang_reduce_scatter(g, all, x, 1, GANG_FLOAT64, GANG_SUM, NULL);
  }
  if (strcmp(coll, "broadcast") == 0) return gang_broadcast(g, x, 1, GANG_FLOAT64, 0, NULL);
  return gang_barrier(g, NULL);
}

static void check(gang_status_t status) {
  if (status != GANG_OK) {
    fprintf(stderr, "overhead_c: %s\n", gang_last_error());
    exit(1);
  }
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  int warmup = argc > 2 ? atoi(argv[2]) : 200;
  gang_options_t options;
  gang_t* g = NULL;
  double x = 1.0, all[1024] = {0};
  const char* coll = getenv("GANG_BENCH_COLL");
  double start, elapsed;
  int i;

  gang_options_init(&options);
  options.backend = getenv("GANG_BENCH_BACKEND"); /* NULL: auto */
  if (getenv("GANG_BENCH_FAKE"))
    check(gang_create_fake(0, 2, &g));
  else
    check(gang_create(&options, &g));
  if (coll != NULL && strcmp(coll, "all_reduce") != 0 && strcmp(coll, "all_gather") != 0 &&
      strcmp(coll, "reduce_scatter") != 0 && strcmp(coll, "broadcast") != 0 &&
      strcmp(coll, "barrier") != 0) {
    fprintf(stderr, "overhead_c: GANG_BENCH_COLL=%s is not one it times\n", coll);
    return 1;
  }
  if (coll != NULL && gang_size(g) > (int)(sizeof all / sizeof all[0])) {
    fprintf(stderr, "overhead_c: GANG_BENCH_COLL takes at most 1024 ranks\n");
    return 1;
  }
  for (i = 0; i < warmup; i++)
    check(call(g, coll, &x, all));
  check(gang_barrier(g, NULL));
  if (getenv("GANG_BENCH_MEDIAN") && iters > 0) {
    double* times = malloc(sizeof(double) * (size_t)iters);
    if (times == NULL) return 1;
    for (i = 0; i < iters; i++) {
      start = now_us();
      check(call(g, coll, &x, all));
      times[i] = now_us() - start;
    }
    qsort(times, (size_t)iters, sizeof(double), by_value);
    elapsed = times[iters / 2] * iters;
    free(times);
  } else {
    start = now_us();
    for (i = 0; i < iters; i++)
      check(call(g, coll, &x, all));
    elapsed = now_us() - start;
  }
  if (gang_rank(g) == 0)
    printf("c %d calls: %.3f us/call\n", iters, elapsed / iters);
  check(gang_destroy(g));
  return 0;
}
