/*
 * train_elastic.c - data-parallel training that survives a lost rank, in
 * C99 with gang.
 *
 * The linear model of train_linear.c, on 4 ranks started by gangrun with
 * --replace-failed 1. The data is 4 shards; each step, every rank sums the
 * gradients of a mini-batch of each shard it holds, one gang_all_reduce
 * (GANG_SUM) adds them up over the ranks, and every rank applies the mean
 * over the 4 shards. At step 20 rank 2 kills itself (SIGKILL):
 *
 *  - the survivors' all-reduce fails (GANG_ERR_PEER_LOST); they call
 *    gang_shrink, get a gang of 3 and train on, the 4 shards now dealt over
 *    3 ranks (the gradient is the same mean over 4 shards as before);
 *  - gangrun starts this program again in rank 2's place, with GANG_JOIN=1
 *    in its environment: it calls gang_join and waits;
 *  - every 40 steps (a step boundary the program chooses, as a checkpoint)
 *    the survivors call gang_grow, which admits the waiting joiner; the new
 *    gang of 4 broadcasts the parameters and the step to it, and all 4 train
 *    to the end.
 *
 * Every process then checks that all 4 hold bitwise-identical parameters,
 * that they are the true ones with a small loss, and that it shrank and
 * grew once (the joiner: joined); it exits nonzero otherwise, and so does
 * gangrun.
 *
 * Usage (CTest example.c.train_elastic runs this):
 *   gangrun --replace-failed 1 --nproc-per-node 4 -- train_elastic
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gang/gang.h>

#define RANKS 4    /* the job's ranks, and its data shards */
#define VICTIM 2   /* the rank that kills itself */
#define KILL_AT 20 /* at this step */
#define STEPS 200
#define ADMIT_EVERY 40   /* the survivors look for joiners this often */
#define REGROW_BY 79     /* and wait for one here (the second look) */
#define DIM 4            /* features */
#define SHARD 512        /* samples per shard */
#define BATCH 32         /* samples per shard per step */
#define NPARAM (DIM + 1) /* weights and bias */
#define MAX_OLD 8

static const float kTrueW[DIM] = {1.5f, -2.0f, 0.5f, 3.0f};
static const float kTrueB = 0.7f;
static const float kLr = 0.2f;

#define CHECK(call)                                                \
  do {                                                             \
    gang_status_t s_ = (call);                                     \
    if (s_ != GANG_OK) {                                           \
      fprintf(stderr, "train_elastic: %s failed: %s: %s\n", #call, \
              gang_status_name(s_), gang_last_error());            \
      exit(1);                                                     \
    }                                                              \
  } while (0)

/* splitmix64, as in train_linear.c: every process makes the same shards. */
static uint64_t next_u64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static float uniform(uint64_t* state) {
  return (float)((double)(next_u64(state) >> 11) / 9007199254740992.0 * 2.0 -
                 1.0);
}

struct shard {
  float x[SHARD][DIM];
  float y[SHARD];
};

static struct shard shards[RANKS];

static void make_shards(void) {
  int s, i, j;
  for (s = 0; s < RANKS; ++s) {
    uint64_t state = 0x5eed0000ULL + (uint64_t)s;
    for (i = 0; i < SHARD; ++i) {
      float y = kTrueB;
      for (j = 0; j < DIM; ++j) {
        shards[s].x[i][j] = uniform(&state);
        y += kTrueW[j] * shards[s].x[i][j];
      }
      shards[s].y[i] = y + 0.01f * uniform(&state);
    }
  }
}

/* grad[0..DIM) += d/dw, grad[DIM] += d/db, grad[NPARAM] += the loss, each
 * of 0.5 * mean((w.x + b - y)^2) over this step's batch of shard s. */
static void add_gradient(int s, const float* param, int step, float* grad) {
  float g[NPARAM + 1] = {0};
  int i, j;
  for (i = 0; i < BATCH; ++i) {
    int k = (step * BATCH + i) % SHARD;
    float err = param[DIM] - shards[s].y[k];
    for (j = 0; j < DIM; ++j) err += param[j] * shards[s].x[k][j];
    for (j = 0; j < DIM; ++j) g[j] += err * shards[s].x[k][j];
    g[DIM] += err;
    g[NPARAM] += 0.5f * err * err;
  }
  for (j = 0; j <= NPARAM; ++j) grad[j] += g[j] / (float)BATCH;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(gang_t* g, const char* text) {
  printf("[rank %d/%d] %s\n", gang_rank(g), gang_size(g), text);
}

int main(void) {
  gang_options_t options = GANG_OPTIONS_INITIALIZER;
  const char* join = getenv("GANG_JOIN");
  const int joiner = join != NULL && strcmp(join, "1") == 0;
  gang_t* g = NULL;
  gang_t* old[MAX_OLD];
  int nold = 0, shrinks = 0, grows = 0, victim = 0, same = 1, ok;
  float param[NPARAM] = {0};
  float grad[NPARAM + 1];
  float all[RANKS * NPARAM];
  float loss = INFINITY;
  int64_t step = 0;
  char line[256];
  int i, j;

  setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, even through a pipe */
  make_shards();
  if (joiner) {
    /* In place of a failed rank: the job's store is in the environment
     * (GANG_INIT_METHOD, GANG_STORE_TOKEN); rank and size come from the
     * members when they admit this process. */
    options.timeout_ms = 60000;
    CHECK(gang_join(&options, &g));
    CHECK(gang_broadcast(g, param, NPARAM, GANG_FLOAT32, 0, NULL));
    CHECK(gang_broadcast(g, &step, 1, GANG_INT64, 0, NULL));
    snprintf(line, sizeof line, "joined at step %lld in place of rank %s",
             (long long)step,
             getenv("GANG_REPLACES") ? getenv("GANG_REPLACES") : "?");
    say(g, line);
  } else {
    options.timeout_ms = 10000;
    CHECK(gang_create(&options, &g));
    if (gang_size(g) != RANKS) {
      fprintf(stderr,
              "train_elastic: wants %d ranks (gangrun "
              "--replace-failed 1 --nproc-per-node %d), not %d\n",
              RANKS, RANKS, gang_size(g));
      return 2;
    }
    victim = gang_rank(g) == VICTIM;
  }

  while (step < STEPS) {
    gang_status_t st;
    if (victim && step == KILL_AT) kill(getpid(), SIGKILL);
    memset(grad, 0, sizeof grad);
    for (i = gang_rank(g); i < RANKS; i += gang_size(g)) {
      add_gradient(i, param, (int)step, grad);
    }
    st = gang_all_reduce(g, grad, grad, NPARAM + 1, GANG_FLOAT32, GANG_SUM,
                         NULL);
    if (st != GANG_OK) {
      gang_t* small = NULL;
      double start;
      snprintf(line, sizeof line, "step %lld: %s: %.100s", (long long)step,
               gang_status_name(st), gang_last_error());
      say(g, line);
      start = now_s();
      CHECK(gang_shrink(g, 0, &small));
      if (nold == MAX_OLD) return 1;
      old[nold++] = g; /* failed: destroyed at the end */
      g = small;
      ++shrinks;
      snprintf(line, sizeof line,
               "shrank to %d ranks in %.2f s; training on with %s",
               gang_size(g), now_s() - start,
               gang_rank(g) == 0 ? "shards 0 and 3" : "one shard");
      say(g, line);
      continue; /* the step again, on the survivors */
    }
    for (j = 0; j < NPARAM; ++j) param[j] -= kLr * grad[j] / RANKS;
    loss = grad[NPARAM] / RANKS;

    if (gang_size(g) < RANKS && (step + 1) % ADMIT_EVERY == 0) {
      /* A step boundary: admit whoever asked to join. */
      gang_t* grown = NULL;
      const double waited = now_s();
      CHECK(gang_grow(g, 0, &grown));
      while (grown == NULL && step == REGROW_BY && now_s() - waited < 60) {
        const struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        CHECK(gang_grow(g, 0, &grown));
      }
      if (grown != NULL) {
        int64_t next = step + 1;
        if (nold == MAX_OLD) return 1;
        old[nold++] = g;
        g = grown;
        ++grows;
        CHECK(gang_broadcast(g, param, NPARAM, GANG_FLOAT32, 0, NULL));
        CHECK(gang_broadcast(g, &next, 1, GANG_INT64, 0, NULL));
        snprintf(line, sizeof line, "grew back to %d ranks after step %lld",
                 gang_size(g), (long long)step);
        say(g, line);
      }
    }
    if (step % 50 == 0 && gang_rank(g) == 0) {
      snprintf(line, sizeof line, "step %lld: loss %.6f", (long long)step,
               loss);
      say(g, line);
    }
    ++step;
  }
  CHECK(gang_barrier(g, NULL));
  for (i = 0; i < nold; ++i) CHECK(gang_destroy(old[i]));

  /* Every rank must hold exactly the same, true parameters. */
  if (gang_size(g) != RANKS) {
    fprintf(stderr, "train_elastic: ended on %d ranks, not %d\n", gang_size(g),
            RANKS);
    return 1;
  }
  CHECK(gang_all_gather(g, param, all, NPARAM, GANG_FLOAT32, NULL));
  for (i = 0; i < RANKS; ++i) {
    if (memcmp(all + i * NPARAM, param, sizeof param) != 0) same = 0;
  }
  ok = same;
  for (j = 0; j < NPARAM; ++j) {
    const float want = j < DIM ? kTrueW[j] : kTrueB;
    if (!(fabsf(param[j] - want) < 0.02f)) ok = 0;
  }
  if (!(loss < 1e-3f)) ok = 0;
  if (joiner ? (shrinks != 0 || grows != 0) : (shrinks != 1 || grows != 1)) {
    ok = 0;
  }
  snprintf(line, sizeof line,
           "done on %d ranks: parameters %s, w [%.3f, %.3f, %.3f, %.3f] "
           "b %.3f, loss %.6f, shrank %d and grew %d time(s)%s",
           gang_size(g), same ? "identical" : "DIFFER", param[0], param[1],
           param[2], param[3], param[4], loss, shrinks, grows,
           ok ? "" : ": FAILED");
  say(g, line);
  CHECK(gang_destroy(g));
  return ok ? 0 : 1;
}
