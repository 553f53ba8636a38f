/*
 * test_chaos.c - the fault-schedule test: seeded schedules of faults on
 * 4-16 real ranks (up to --max-ranks, 6 by default) over gloo, shm and two
 * levels, each followed by the recovery a training job makes (gang_shrink,
 * then gang_grow admitting joiners), with invariants checked after every
 * schedule.
 *
 *   test_chaos [--schedules N] [--seed S] [--max-ranks M]
 *
 * A schedule draws, from its seed: the backend and the number of ranks; one
 * or two ranks SIGKILLed inside a stream of all-reduces; a survivor that
 * calls gang_shrink up to 1.5 s late (alive: it must stay); a survivor
 * SIGSTOPped for less than half the detection interval inside gang_shrink
 * (it must stay); a rank SIGSTOPped for longer than the detection interval
 * (it may be excluded, and must then be told so); a rank that dies at a
 * named step inside gang_shrink (GANG_FAULT_POINT: counting in, deciding,
 * proposing, committing); joiners, one of which may die right after taking
 * its ticket, after saying what it asks for, or after it was admitted
 * (before the grown gang met). At most two deaths each.
 *
 * Invariants, per schedule:
 *   - every rank neither killed nor stopped past the detection interval is
 *     in the shrunk gang, and all its members agree on its membership and
 *     name; the grown gang has every healthy joiner;
 *   - no call returns later than its timeout + 1 s, and every error of the
 *     failed collective names a rank that was killed or stopped;
 *   - all-reduces on the shrunk and the grown gang are exact.
 * A failing schedule prints its seed; --seed S --schedules 1 replays it.
 * The last line sums up: schedules run, faults injected, healthy ranks
 * lost, hangs, wrong results.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gang/gang.h>

#include "harness.h"

#define DETECT_MS 1000
#define GANG_TIMEOUT_MS 5000
/* A survivor is waited for until the first one in's shrink timeout, less
 * the time kept to form the new gang (2 s): the last ones in are those
 * whose collective hung until its timeout (their peers alive but stopped),
 * plus the late delay. So that every healthy rank can be waited for:
 * GANG_TIMEOUT_MS + 1.5 s late + 2 s < SHRINK_TIMEOUT_MS, with a margin. */
#define SHRINK_TIMEOUT_MS 10000
#define SLACK_MS 1000
#define MAX_MEMBERS 16
#define MAX_JOINERS 2

/* Shared slots. */
#define S_READY 1     /* members inside the stream of all-reduces */
#define S_IN_SHRINK 2 /* members that called gang_shrink */
#define S_SHRUNK 3    /* members with their shrunk gang */
#define S_ASKED 4     /* joiners that asked */
#define S_FAULT_IN 5  /* the rank that dies inside gang_shrink has called it */
#define S_DYING_PID 6 /* the pid of the joiner that dies */
#define S_REC 16      /* per rank: R_* fields, R_STRIDE apart */
#define R_STRIDE 8
#define R_DONE 0      /* 1: finished its part as the schedule expects */
#define R_SIZE 1      /* the shrunk gang's size, -1 excluded */
#define R_MEMBERS 2   /* bitmask of the shrunk gang's root ranks */
#define R_NAME 3      /* hash of its name */
#define R_GROWN 4     /* the grown gang's size */
#define R_WRONG 5     /* wrong all-reduce results seen */
#define R_LATE 6      /* a call that outran its timeout + slack */
#define R_BLAME 7     /* the failed collective's error named no faulty rank */

typedef struct schedule {
  uint64_t seed;
  const char* backend;
  int hosts; /* > 0: auto, ranks playing this many hosts */
  int n;     /* members */
  int kill[2], nkill;
  int late, late_ms;
  int short_stop, short_ms;
  int long_stop;
  int fault_rank;
  const char* fault_point;
  int joiners;
  const char* joiner_dies_at; /* the first joiner dies there, or NULL */
} schedule_t;

#define NONE (-1)

static uint64_t next(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int pick(uint64_t* s, int n) { return (int)(next(s) % (uint64_t)n); }

/* A rank of the schedule that plays no part yet, or NONE. */
static int free_rank(const schedule_t* c, uint64_t* s, const int* taken) {
  int tries;
  for (tries = 0; tries < 64; ++tries) {
    const int r = pick(s, c->n);
    if (!taken[r]) return r;
  }
  return NONE;
}

static schedule_t draw(uint64_t seed, int max_members) {
  static const char* const points[] = {"shrink.arrive", "shrink.decide", "shrink.propose",
                                       "shrink.commit"};
  schedule_t c;
  uint64_t s = seed;
  int taken[MAX_MEMBERS] = {0}, deaths = 0, r;
  memset(&c, 0, sizeof c);
  c.seed = seed;
  switch (pick(&s, 3)) {
    case 0:
      c.backend = "gloo";
      break;
    case 1:
      c.backend = "shm";
      break;
    default:
      c.backend = "auto";
      c.hosts = 2;
      break;
  }
  c.n = 4 + pick(&s, max_members - 3);
  c.late = c.short_stop = c.long_stop = c.fault_rank = NONE;
  c.kill[0] = c.kill[1] = NONE;
  c.nkill = 1 + (pick(&s, 4) == 0);
  for (r = 0; r < c.nkill; ++r) {
    c.kill[r] = free_rank(&c, &s, taken);
    taken[c.kill[r]] = 1;
    ++deaths;
  }
  if (pick(&s, 2) == 0) {
    c.late = free_rank(&c, &s, taken);
    taken[c.late] = 1;
    c.late_ms = pick(&s, 1501);
  }
  if (pick(&s, 3) == 0) {
    c.short_stop = free_rank(&c, &s, taken);
    taken[c.short_stop] = 1;
    c.short_ms = 100 + pick(&s, DETECT_MS / 2 - 100);
  }
  if (pick(&s, 4) == 0 && c.n - c.nkill > 3) {
    c.long_stop = free_rank(&c, &s, taken);
    taken[c.long_stop] = 1;
  }
  if (deaths < 2 && pick(&s, 2) == 0 && c.n - c.nkill - (c.long_stop != NONE) > 2) {
    c.fault_rank = free_rank(&c, &s, taken);
    taken[c.fault_rank] = 1;
    c.fault_point = points[pick(&s, 4)];
    ++deaths;
  }
  c.joiners = pick(&s, MAX_JOINERS + 1);
  if (c.joiners > 0 && deaths < 2 && pick(&s, 2) == 0) {
    static const char* const joiner_points[] = {"join.ticket", "join.asked", "join.admitted"};
    c.joiner_dies_at = joiner_points[pick(&s, 3)];
  }
  return c;
}

static int is_killed(const schedule_t* c, int r) {
  return r == c->kill[0] || r == c->kill[1] || r == c->fault_rank;
}
static int stays(const schedule_t* c, int r) { return !is_killed(c, r) && r != c->long_stop; }
static int survivors(const schedule_t* c) {
  int r, k = 0;
  for (r = 0; r < c->n; ++r) k += stays(c, r);
  return k;
}
/* Whether process pid has ended (a zombie has: nobody reaps it before the
 * schedule ends). */
static int process_gone(pid_t pid) {
  char path[64], buf[256];
  FILE* f;
  const char* close_paren;
  int gone = 1;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  if (f == NULL) return 1;
  if (fgets(buf, sizeof buf, f) != NULL && (close_paren = strrchr(buf, ')')) != NULL &&
      close_paren[1] == ' ') {
    gone = close_paren[2] == 'Z' || close_paren[2] == 'X';
  }
  fclose(f);
  return gone;
}

static int healthy_joiners(const schedule_t* c) {
  return c->joiners - (c->joiner_dies_at != NULL);
}

static uint64_t hash(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

/* Whether `text` names one of the ranks in `ranks` ("rank 3", "ranks 1, 3"). */
static int names_any(const char* text, const int* ranks, int n) {
  const char* at = text;
  while ((at = strstr(at, "rank")) != NULL) {
    const char* p = at + 4;
    int i;
    if (*p == 's') ++p;
    while (*p == ' ') {
      char* end;
      const long r = strtol(p, &end, 10);
      if (end == p) break;
      for (i = 0; i < n; ++i)
        if (ranks[i] == r) return 1;
      p = end;
      if (*p == ',') ++p;
    }
    at += 4;
  }
  return 0;
}

static volatile int64_t* rec(int r, int field) {
  return &gang_test_shared_ints()[S_REC + r * R_STRIDE + field];
}

static void bump(int slot) { __atomic_add_fetch(&gang_test_shared_ints()[slot], 1, __ATOMIC_SEQ_CST); }

#define TIMED(limit_ms, call)                                                 \
  do {                                                                        \
    const int64_t t0_ = gang_test_now_ms();                                   \
    st = (call);                                                              \
    if (gang_test_now_ms() - t0_ > (limit_ms) + SLACK_MS) {                   \
      *rec(rank, R_LATE) = 1;                                                 \
      fprintf(stderr, "[rank %d] %s took %lld ms (%s)\n", rank, #call,          \
              (long long)(gang_test_now_ms() - t0_), gang_status_name(st));   \
    }                                                                         \
  } while (0)

static gang_t* make_member(const schedule_t* c, int rank, const char* url) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_options_init(&o);
  o.backend = c->backend;
  o.rank = rank;
  o.size = c->n;
  o.init_method = url;
  o.timeout_ms = GANG_TIMEOUT_MS;
  return gang_create(&o, &g) == GANG_OK ? g : NULL;
}

/* Exact on any gang: the sum of ones is its size. */
static int check_sum(gang_t* g, int rank) {
  int64_t one = 1, sum = 0;
  gang_status_t st;
  TIMED(GANG_TIMEOUT_MS, gang_all_reduce(g, &one, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK_OK(st);
  if (sum != gang_size(g)) *rec(rank, R_WRONG) += 1;
  return 0;
}

static int member(const schedule_t* c, int rank, const char* url) {
  gang_t* g = make_member(c, rank, url);
  gang_t* small = NULL;
  gang_t* grown = NULL;
  gang_status_t st;
  int i, faulty[4], nfaulty = 0;
  int64_t mask = 0, root_sum = 0, want_sum = 0;
  CHECK(g != NULL, "gang_create: %s", gang_last_error());
  for (i = 0; i < 2; ++i)
    if (c->kill[i] != NONE) faulty[nfaulty++] = c->kill[i];
  if (c->long_stop != NONE) faulty[nfaulty++] = c->long_stop;
  CHECK_OK(gang_barrier(g, NULL));
  bump(S_READY);
  if (is_killed(c, rank) && rank != c->fault_rank) {
    gang_test_sleep_ms(60000); /* killed by the parent */
    return 1;
  }
  /* A stream of all-reduces until the loss reaches this rank. */
  for (i = 0; i < 100000; ++i) {
    int64_t x = 1, y = 0;
    /* A rank stopped in here cannot return while it is stopped: its time
     * is the stop's, not the call's. */
    TIMED(rank == c->long_stop ? 3600000 : GANG_TIMEOUT_MS,
          gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
    if (st != GANG_OK) break;
    if (y != c->n) *rec(rank, R_WRONG) += 1;
    gang_test_sleep_ms(1);
  }
  CHECK(st != GANG_OK, "the stream of all-reduces never failed");
  if (rank != c->long_stop && !names_any(gang_last_error(), faulty, nfaulty)) {
    *rec(rank, R_BLAME) = 1;
    fprintf(stderr, "[rank %d] blames no faulty rank: %s\n", rank, gang_last_error());
  }
  if (rank == c->late) gang_test_sleep_ms(c->late_ms);
  if (rank == c->fault_rank) {
    setenv("GANG_FAULT_POINT", c->fault_point, 1);
    bump(S_FAULT_IN);
  } else if (c->fault_rank != NONE && strcmp(c->fault_point, "shrink.arrive") != 0) {
    /* The faulty rank must be the first in, the decider, to die where it
     * is meant to: after it called gang_shrink (its collective may have
     * failed later than this rank's). */
    CHECK(gang_test_wait_shared(S_FAULT_IN, 1, 20000) == 0, "the faulty rank never shrank");
    gang_test_sleep_ms(200);
  }
  bump(S_IN_SHRINK);
  TIMED(SHRINK_TIMEOUT_MS, gang_shrink(g, SHRINK_TIMEOUT_MS, &small));
  if (rank == c->fault_rank) {
    fprintf(stderr, "[rank %d] outlived its death at %s\n", rank, c->fault_point);
    return 1;
  }
  if (rank == c->long_stop && st != GANG_OK) {
    /* Stopped past the detection interval: excluded, and told so. */
    CHECK(strstr(gang_last_error(), "excluded") != NULL, "the excluded rank's error: %s",
          gang_last_error());
    *rec(rank, R_SIZE) = -1;
    *rec(rank, R_DONE) = 1;
    gang_destroy(g);
    return 0;
  }
  CHECK(st == GANG_OK, "gang_shrink: %s", gang_last_error());
  for (i = 0; i < gang_size(small); ++i) {
    const int root = gang_root_rank(small, i);
    mask |= (int64_t)1 << root;
    want_sum += root;
  }
  *rec(rank, R_SIZE) = gang_size(small);
  *rec(rank, R_MEMBERS) = mask;
  *rec(rank, R_NAME) = (int64_t)(hash(gang_name(small)) >> 1);
  bump(S_SHRUNK);
  {
    int64_t mine = rank;
    TIMED(GANG_TIMEOUT_MS, gang_all_reduce(small, &mine, &root_sum, 1, GANG_INT64, GANG_SUM,
                                           NULL));
    CHECK_OK(st);
    if (root_sum != want_sum) *rec(rank, R_WRONG) += 1;
  }
  if (c->joiners > 0) {
    const int64_t t0 = gang_test_now_ms();
    /* Every joiner has asked (and the dying one died) before the look. */
    CHECK(gang_test_wait_shared(S_ASKED, c->joiners, 20000) == 0, "the joiners never asked");
    gang_test_sleep_ms(300);
    /* A joiner that dies once admitted needs a grow to admit it: with no
     * healthy joiner, the members grow until all of them saw it dead
     * (agreed by an all-reduce, so they all stop at the same step). */
    const int dies_admitted =
        c->joiner_dies_at != NULL && strcmp(c->joiner_dies_at, "join.admitted") == 0;
    if (healthy_joiners(c) > 0 || dies_admitted) {
      for (;;) {
        TIMED(GANG_TIMEOUT_MS, gang_grow(small, GANG_TIMEOUT_MS, &grown));
        CHECK(st == GANG_OK, "gang_grow: %s", gang_last_error());
        if (grown != NULL) break;
        if (healthy_joiners(c) == 0) {
          int64_t gone = process_gone((pid_t)gang_test_shared_ints()[S_DYING_PID]), all = 0;
          TIMED(GANG_TIMEOUT_MS,
                gang_all_reduce(small, &gone, &all, 1, GANG_INT64, GANG_MIN, NULL));
          CHECK_OK(st);
          if (all) break;
        }
        CHECK(gang_test_now_ms() - t0 < 15000, "no joiner was admitted");
        gang_test_sleep_ms(20);
      }
      if (grown != NULL) {
        *rec(rank, R_GROWN) = gang_size(grown);
        if (check_sum(grown, rank)) return 1;
        gang_destroy(grown);
      }
    }
  }
  if (check_sum(small, rank)) return 1;
  gang_destroy(small);
  gang_destroy(g);
  *rec(rank, R_DONE) = 1;
  return 0;
}

static int joiner(const schedule_t* c, int rank, const char* url) {
  const int k = rank - c->n; /* 0-based among the joiners */
  gang_options_t o;
  gang_t* grown = NULL;
  gang_status_t st;
  CHECK(gang_test_wait_shared(S_SHRUNK, survivors(c), 30000) == 0, "the members never shrank");
  /* One at a time, in order, so the dying one's ticket comes first. */
  CHECK(gang_test_wait_shared(S_ASKED, k, 20000) == 0, "turn");
  if (k == 0 && c->joiner_dies_at != NULL) {
    setenv("GANG_FAULT_POINT", c->joiner_dies_at, 1);
    gang_test_shared_ints()[S_DYING_PID] = getpid();
  }
  if (k > 0) gang_test_sleep_ms(150); /* the one before has its ticket */
  bump(S_ASKED);
  gang_options_init(&o);
  o.init_method = url;
  o.timeout_ms = 15000;
  TIMED(15000, gang_join(&o, &grown));
  CHECK(k != 0 || c->joiner_dies_at == NULL, "joiner outlived its death at %s",
        c->joiner_dies_at);
  CHECK(st == GANG_OK, "gang_join: %s", gang_last_error());
  *rec(rank, R_GROWN) = gang_size(grown);
  if (check_sum(grown, rank)) return 1;
  gang_destroy(grown);
  *rec(rank, R_DONE) = 1;
  return 0;
}

static int proc(int rank, int size, const char* url, void* arg) {
  const schedule_t* c = (const schedule_t*)arg;
  (void)size;
  return rank < c->n ? member(c, rank, url) : joiner(c, rank, url);
}

/* Waits until shared int `slot` reaches `value` (several ranks may pass it
 * at once); 0 if it did. */
static int wait_at_least(int slot, int64_t value, int64_t timeout_ms) {
  const int64_t end = gang_test_now_ms() + timeout_ms;
  while (gang_test_shared_ints()[slot] < value) {
    if (gang_test_now_ms() > end) return -1;
    gang_test_sleep_ms(1);
  }
  return 0;
}

static void parent(const pid_t* pids, int size, void* arg) {
  const schedule_t* c = (const schedule_t*)arg;
  uint64_t s = c->seed ^ 0xfeedull;
  int i;
  (void)size;
  if (gang_test_wait_shared(S_READY, c->n, 20000) != 0) return;
  gang_test_sleep_ms(pick(&s, 200));
  if (c->long_stop != NONE) kill(pids[c->long_stop], SIGSTOP);
  for (i = 0; i < 2; ++i)
    if (c->kill[i] != NONE) kill(pids[c->kill[i]], SIGKILL);
  if (c->short_stop != NONE && wait_at_least(S_IN_SHRINK, 1, 20000) == 0) {
    kill(pids[c->short_stop], SIGSTOP);
    gang_test_sleep_ms(c->short_ms);
    kill(pids[c->short_stop], SIGCONT);
  }
  if (c->long_stop != NONE) {
    gang_test_wait_shared(S_SHRUNK, survivors(c), 30000);
    kill(pids[c->long_stop], SIGCONT);
  }
}

typedef struct totals {
  int schedules, faults, lost, hangs, wrong, late, unblamed, failed;
} totals_t;

static void describe(const schedule_t* c, char* out, size_t len) {
  char killed[32];
  if (c->nkill > 1) {
    snprintf(killed, sizeof killed, "%d and %d", c->kill[0], c->kill[1]);
  } else {
    snprintf(killed, sizeof killed, "%d", c->kill[0]);
  }
  snprintf(out, len,
           "seed %#llx: %s%s, %d ranks, killed %s, late %d (%d ms), short stop %d "
           "(%d ms), long stop %d, dies in shrink %d at %s, %d joiner(s)%s%s",
           (unsigned long long)c->seed, c->backend, c->hosts ? " on 2 hosts" : "", c->n,
           killed, c->late, c->late_ms, c->short_stop, c->short_ms, c->long_stop,
           c->fault_rank, c->fault_point ? c->fault_point : "-", c->joiners,
           c->joiner_dies_at ? ", the first dying at " : "",
           c->joiner_dies_at ? c->joiner_dies_at : "");
}

static int run_schedule(const schedule_t* c, totals_t* t) {
  gang_test_opts_t o;
  char what[512];
  int r, rc, bad = 0, first = NONE;
  const int procs = c->n + c->joiners;
  describe(c, what, sizeof what);
  if (c->hosts > 0) {
    char h[16];
    snprintf(h, sizeof h, "%d", c->hosts);
    setenv("GANG_TEST_HOSTS", h, 1);
  } else {
    unsetenv("GANG_TEST_HOSTS");
  }
  gang_test_opts_init(&o);
  o.size = procs;
  o.plain_fn = proc;
  o.arg = (void*)c;
  o.parent_fn = parent;
  o.wall_timeout_s = 90;
  o.gang_timeout_ms = GANG_TIMEOUT_MS;
  o.killed_rank = c->kill[0];
  o.killed_rank2 = c->kill[1] != NONE ? c->kill[1] : c->fault_rank != NONE ? c->fault_rank
                   : c->joiner_dies_at != NULL ? c->n : NONE;
  rc = gang_test_run(&o);
  t->schedules += 1;
  t->faults += c->nkill + (c->late != NONE) + (c->short_stop != NONE) +
               (c->long_stop != NONE) + (c->fault_rank != NONE) + (c->joiner_dies_at != NULL);
  for (r = 0; r < c->n; ++r) {
    if (!stays(c, r)) continue;
    if (*rec(r, R_DONE) != 1) {
      ++t->lost;
      bad = 1;
    }
    if (first == NONE) first = r;
    if (*rec(r, R_SIZE) != survivors(c) || *rec(r, R_MEMBERS) != *rec(first, R_MEMBERS) ||
        *rec(r, R_NAME) != *rec(first, R_NAME)) {
      fprintf(stderr, "chaos: rank %d's shrunk gang: %lld ranks (mask %#llx), rank %d's: "
              "%lld (mask %#llx), want %d\n", r, (long long)*rec(r, R_SIZE),
              (unsigned long long)*rec(r, R_MEMBERS), first, (long long)*rec(first, R_SIZE),
              (unsigned long long)*rec(first, R_MEMBERS), survivors(c));
      ++t->lost;
      bad = 1;
    }
    if (c->joiners > 0 && healthy_joiners(c) > 0 &&
        *rec(r, R_GROWN) != survivors(c) + healthy_joiners(c)) {
      fprintf(stderr, "chaos: rank %d grew to %lld, want %d\n", r,
              (long long)*rec(r, R_GROWN), survivors(c) + healthy_joiners(c));
      ++t->lost;
      bad = 1;
    }
  }
  for (r = 0; r < procs; ++r) {
    t->wrong += (int)*rec(r, R_WRONG);
    t->late += (int)*rec(r, R_LATE);
    t->unblamed += (int)*rec(r, R_BLAME);
    bad |= *rec(r, R_WRONG) != 0 || *rec(r, R_LATE) != 0 || *rec(r, R_BLAME) != 0;
  }
  if (rc != 0) {
    ++t->hangs;
    bad = 1;
  }
  if (bad) {
    ++t->failed;
    fprintf(stderr, "chaos: FAILED %s (replay: test_chaos --seed %#llx --schedules 1)\n",
            what, (unsigned long long)c->seed);
  } else {
    printf("chaos: ok %s\n", what);
    fflush(stdout);
  }
  return bad;
}

int main(int argc, char** argv) {
  int schedules = 25, max_members = 6, i;
  uint64_t seed = 0xc4a05ull;
  totals_t t;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--schedules") == 0) {
      schedules = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--seed") == 0) {
      seed = strtoull(argv[i + 1], NULL, 0);
    } else if (strcmp(argv[i], "--max-ranks") == 0) {
      max_members = atoi(argv[i + 1]);
    }
  }
  if (max_members < 4 || max_members > MAX_MEMBERS) max_members = MAX_MEMBERS;
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  setenv("GANG_SHRINK_FORM_MS", "1500", 1);
  memset(&t, 0, sizeof t);
  {
    /* Schedule i's seed: the seed given, then the splitmix64 stream from
     * it, so runs with other seeds draw other schedules. */
    uint64_t s = seed;
    for (i = 0; i < schedules; ++i) {
      const schedule_t c = draw(i == 0 ? seed : next(&s), max_members);
      run_schedule(&c, &t);
    }
  }
  printf("chaos: %d schedules, %d faults injected, healthy ranks lost: %d, hangs: %d, "
         "wrong results: %d, calls past their timeout: %d, errors blaming no faulty rank: "
         "%d\n",
         t.schedules, t.faults, t.lost, t.hangs, t.wrong, t.late, t.unblamed);
  printf("%d passed, %d failed\n", t.schedules - t.failed, t.failed);
  return t.failed == 0 ? 0 : 1;
}
