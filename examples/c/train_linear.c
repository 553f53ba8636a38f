/*
 * train_linear.c - data-parallel SGD on a linear model, in C99 with gang.
 *
 * Every rank owns a shard of synthetic data y = w*.x + b* + noise, generated
 * from a seed derived from its rank. Each step, every rank computes the
 * gradient of the squared error on a mini-batch of its shard, the gradients
 * (and the loss, for printing) are averaged across ranks with one
 * gang_all_reduce(GANG_AVG), and every rank applies the same update. Because
 * the averaged gradient is bitwise identical on every rank, so are the
 * weights: the program checks that at the end with gang_all_gather, and that
 * the model found w* and b*. It exits nonzero if either check fails.
 *
 * Usage:
 *   train_linear [--rank R --size N] [--init-method URL] [--steps S]
 *                [--lr LR] [--backend NAME]
 *
 * Without --rank/--size/--init-method, gang_create reads the launch
 * environment (gangrun's GANG_* variables, torchrun's, SLURM's, ...); with
 * none, the program runs as a single rank. Example, 4 ranks on this machine:
 *   gangrun --nproc-per-node 4 -- train_linear
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gang/gang.h>

#define DIM 4            /* features */
#define SHARD 512        /* samples per rank */
#define BATCH 32         /* samples per rank per step */
#define NPARAM (DIM + 1) /* weights and bias */

static const float kTrueW[DIM] = {1.5f, -2.0f, 0.5f, 3.0f};
static const float kTrueB = 0.7f;

#define CHECK(call)                                                       \
  do {                                                                    \
    gang_status_t s_ = (call);                                            \
    if (s_ != GANG_OK) {                                                  \
      fprintf(stderr, "train_linear: %s failed: %s: %s\n", #call,         \
              gang_status_name(s_), gang_last_error());                   \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

/* splitmix64: a small, well-mixed generator, so every rank's shard is
 * reproducible from its seed alone. */
static uint64_t next_u64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float uniform(uint64_t* state) {
  return (float)((double)(next_u64(state) >> 11) / 9007199254740992.0 * 2.0 -
                 1.0);
}

struct shard {
  float x[SHARD][DIM];
  float y[SHARD];
};

static void make_shard(struct shard* s, int rank) {
  uint64_t state = 0x5eed0000ULL + (uint64_t)rank;
  int i, j;
  for (i = 0; i < SHARD; ++i) {
    float y = kTrueB;
    for (j = 0; j < DIM; ++j) {
      s->x[i][j] = uniform(&state);
      y += kTrueW[j] * s->x[i][j];
    }
    s->y[i] = y + 0.01f * uniform(&state);
  }
}

/* grad[0..DIM) = d/dw, grad[DIM] = d/db, grad[NPARAM] = the loss, all of
 * 0.5 * mean((w.x + b - y)^2) over samples [first, first + BATCH). */
static void gradient(const struct shard* s, const float* param, int first,
                     float* grad) {
  int i, j;
  memset(grad, 0, (NPARAM + 1) * sizeof *grad);
  for (i = 0; i < BATCH; ++i) {
    int k = (first + i) % SHARD;
    float err = param[DIM] - s->y[k];
    for (j = 0; j < DIM; ++j) err += param[j] * s->x[k][j];
    for (j = 0; j < DIM; ++j) grad[j] += err * s->x[k][j];
    grad[DIM] += err;
    grad[NPARAM] += 0.5f * err * err;
  }
  for (j = 0; j <= NPARAM; ++j) grad[j] /= (float)BATCH;
}

static void usage(void) {
  fprintf(stderr,
          "usage: train_linear [--rank R --size N] [--init-method URL] "
          "[--steps S] [--lr LR] [--backend NAME]\n");
}

int main(int argc, char** argv) {
  gang_options_t options = GANG_OPTIONS_INITIALIZER;
  gang_t* gang = NULL;
  struct shard* data;
  float param[NPARAM] = {0};
  float grad[NPARAM + 1];
  float* all_params;
  int steps = 200;
  float lr = 0.2f;
  int rank, size, step, r, j, ok = 1;

  for (j = 1; j < argc; ++j) {
    const char* value = j + 1 < argc ? argv[j + 1] : NULL;
    if (!value) {
      usage();
      return 2;
    }
    if (strcmp(argv[j], "--rank") == 0) {
      options.rank = atoi(value);
    } else if (strcmp(argv[j], "--size") == 0) {
      options.size = atoi(value);
    } else if (strcmp(argv[j], "--init-method") == 0) {
      options.init_method = value;
    } else if (strcmp(argv[j], "--steps") == 0) {
      steps = atoi(value);
    } else if (strcmp(argv[j], "--lr") == 0) {
      lr = (float)atof(value);
    } else if (strcmp(argv[j], "--backend") == 0) {
      options.backend = value;
    } else {
      usage();
      return 2;
    }
    ++j;
  }

  CHECK(gang_create(&options, &gang));
  rank = gang_rank(gang);
  size = gang_size(gang);
  if (rank == 0) {
    printf("train_linear: %d rank(s) on the %s backend (gang %s)\n", size,
           gang_backend_name(gang), gang_version_string());
  }

  data = malloc(sizeof *data);
  all_params = malloc((size_t)size * NPARAM * sizeof *all_params);
  if (!data || !all_params) {
    fprintf(stderr, "train_linear: out of memory\n");
    return 1;
  }
  make_shard(data, rank);

  for (step = 0; step < steps; ++step) {
    gradient(data, param, step * BATCH, grad);
    /* One call averages the gradients and the loss across ranks, in place. */
    CHECK(gang_all_reduce(gang, grad, grad, NPARAM + 1, GANG_FLOAT32,
                          GANG_AVG, NULL));
    for (j = 0; j < NPARAM; ++j) param[j] -= lr * grad[j];
    if (rank == 0 && (step % 20 == 0 || step == steps - 1)) {
      printf("step %4d  loss %.6f\n", step, grad[NPARAM]);
    }
  }

  /* Every rank must hold exactly the same parameters. */
  CHECK(gang_all_gather(gang, param, all_params, NPARAM, GANG_FLOAT32, NULL));
  for (r = 0; r < size; ++r) {
    if (memcmp(all_params + (size_t)r * NPARAM, param, sizeof param) != 0) {
      fprintf(stderr,
              "train_linear: rank %d: parameters of rank %d differ from "
              "mine\n",
              rank, r);
      ok = 0;
    }
  }
  for (j = 0; j < NPARAM; ++j) {
    float want = j < DIM ? kTrueW[j] : kTrueB;
    if (!(fabsf(param[j] - want) < 0.05f)) {
      fprintf(stderr,
              "train_linear: rank %d: parameter %d is %f, expected about %f\n",
              rank, j, param[j], want);
      ok = 0;
    }
  }
  if (rank == 0) {
    printf("w = [");
    for (j = 0; j < DIM; ++j) printf("%s%.4f", j ? ", " : "", param[j]);
    printf("]  b = %.4f  (true w = [1.5, -2, 0.5, 3], b = 0.7)\n", param[DIM]);
  }

  /* Agree on the outcome, so every rank exits with the same status. */
  {
    double failures = 0.0;
    CHECK(gang_all_sum(gang, ok ? 0.0 : 1.0, &failures));
    ok = failures == 0.0;
  }
  if (rank == 0) {
    printf("%s: parameters %s on all %d ranks\n", ok ? "OK" : "FAILED",
           ok ? "identical and converged" : "differ or did not converge",
           size);
  }

  CHECK(gang_destroy(gang));
  free(all_params);
  free(data);
  return ok ? 0 : 1;
}
