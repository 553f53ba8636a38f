/*
 * overhead.c - times a blocking 8-byte all-reduce (one double, SUM) through
 * the C API: the reference for the bindings' per-call overhead. Run it on 2
 * ranks (see bindings/bench_overhead.sh); rank 0 prints the mean time per
 * call in microseconds, or with GANG_BENCH_MEDIAN set the median of the
 * calls' times (over TCP, a few calls of milliseconds would swamp the mean).
 * With GANG_BENCH_FAKE set it times a fake gang of 2 instead (one process,
 * no traffic): the cost of the call itself. GANG_BENCH_BACKEND names the
 * backend (default: auto).
 *
 *   overhead_c [iterations [warmup]]
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
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
  double x = 1.0;
  double start, elapsed;
  int i;

  gang_options_init(&options);
  options.backend = getenv("GANG_BENCH_BACKEND"); /* NULL: auto */
  if (getenv("GANG_BENCH_FAKE"))
    check(gang_create_fake(0, 2, &g));
  else
    check(gang_create(&options, &g));
  for (i = 0; i < warmup; i++)
    check(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT64, GANG_SUM, NULL));
  check(gang_barrier(g, NULL));
  if (getenv("GANG_BENCH_MEDIAN") && iters > 0) {
    double* times = malloc(sizeof(double) * (size_t)iters);
    if (times == NULL) return 1;
    for (i = 0; i < iters; i++) {
      start = now_us();
      check(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT64, GANG_SUM, NULL));
      times[i] = now_us() - start;
    }
    qsort(times, (size_t)iters, sizeof(double), by_value);
    elapsed = times[iters / 2] * iters;
    free(times);
  } else {
    start = now_us();
    for (i = 0; i < iters; i++)
      check(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT64, GANG_SUM, NULL));
    elapsed = now_us() - start;
  }
  if (gang_rank(g) == 0)
    printf("c %d calls: %.3f us/call\n", iters, elapsed / iters);
  check(gang_destroy(g));
  return 0;
}
