/*
 * elastic_bench.c - what losing a rank costs: recovery through gang_shrink,
 * a replacement's way back through gang_join and gang_grow, and whether
 * repeating both leaks.
 *
 *   build/bench/elastic_bench [--ranks N] [--repeats R] [--cycles C]
 *
 * Recovery: N ranks (8) all-reduce; one is SIGKILLed while the others wait
 * in the next all-reduce. Each survivor times from its failed call's return
 * to the end of its first all-reduce on the gang gang_shrink gave it; the
 * slowest survivor's time is the episode's. On shm, on gloo, and on two
 * levels (shm+gloo) with the ranks playing two hosts of N/2 (GANG_HOST_ID).
 * Grow: a replacement calls gang_join, and the survivors' gang_grow to the
 * end of the first all-reduce of all N is timed (the slowest member's).
 * Cycles: 4 ranks on gloo lose their last rank and take in a replacement C
 * times (100); ranks 0-2 live through all of them and report their
 * resident memory and open descriptors after cycle 10 and after the last.
 *
 * Then the same recovery with a survivor 1 s late to gang_shrink (writing
 * a checkpoint: alive, so waited for; the target is its delay + 0.5 s),
 * and with the round's decider killed inside gang_shrink before it
 * commits (GANG_FAULT_POINT=shrink.propose; the target is the detection
 * interval, GANG_FAILURE_DETECT_MS, + 1 s).
 *
 * The store is served by a process of its own, as gangrun serves it; the
 * cycles report its resident memory too.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gang/gang.h>

#define MAX_RANKS 64
#define TIMEOUT_MS 20000

/* Shared between the parent and every rank. */
typedef struct shared {
  volatile int ready;          /* ranks in their blocking all-reduce */
  volatile int recovered;      /* survivors with a working shrunk gang */
  volatile int asked;          /* the replacement is about to gang_join */
  volatile int grown;          /* members with a working grown gang */
  volatile int cycle_ready;    /* cycles: members ready for the kill */
  volatile int failed;         /* any rank that saw an error */
  int64_t recover_ms[MAX_RANKS];
  int64_t grow_ms[MAX_RANKS];
  int64_t rss_kb[3][3];        /* cycles: ranks 0-2, after cycle 10, half, the last */
  int64_t fds[3][3];
  int64_t heap[3][3];          /* bytes in use by malloc */
  int64_t store_kb[3];         /* cycles: the store's RSS at the same points */
  volatile int sampled;        /* cycles: members that sampled this point */
  char error[512];
} shared_t;

static shared_t* sh;
static char url[128];

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void wait_for(volatile int* v, int value) {
  const int64_t until = now_ms() + 60000;
  while (__atomic_load_n(v, __ATOMIC_SEQ_CST) < value && now_ms() < until &&
         !sh->failed)
    sleep_ms(1);
}

static void bump(volatile int* v) { __atomic_add_fetch(v, 1, __ATOMIC_SEQ_CST); }

#define MUST(call)                                                           \
  do {                                                                       \
    gang_status_t s_ = (call);                                               \
    if (s_ != GANG_OK) {                                                     \
      snprintf(sh->error, sizeof sh->error, "%s: %s: %s", #call,             \
               gang_status_name(s_), gang_last_error());                     \
      sh->failed = 1;                                                        \
      _exit(1);                                                              \
    }                                                                        \
  } while (0)

static void be_child(void) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_IGN);
}

static void place(int rank, int size, int hosts) {
  if (hosts > 1) {
    char id[64];
    snprintf(id, sizeof id, "elastic-bench-host-%d", rank / (size / hosts));
    setenv("GANG_HOST_ID", id, 1);
  }
}

static gang_t* create(const char* backend, int rank, int size) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_options_init(&o);
  o.backend = backend;
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.timeout_ms = TIMEOUT_MS;
  o.name = "bench";
  MUST(gang_create(&o, &g));
  return g;
}

/* The sum of 0..n-1 over the gang: every rank checks it. */
static void check_sum(gang_t* g) {
  double x = gang_rank(g), y = 0;
  const int n = gang_size(g);
  MUST(gang_all_reduce(g, &x, &y, 1, GANG_FLOAT64, GANG_SUM, NULL));
  if (y != (double)n * (n - 1) / 2) {
    snprintf(sh->error, sizeof sh->error, "sum %g on %d ranks", y, n);
    sh->failed = 1;
    _exit(1);
  }
}

enum mode { KILLED, LATE, DECIDER_DIES };
#define LATE_MS 1000
static int g_late; /* this rank calls gang_shrink LATE_MS after its failure */

/* Blocks in an all-reduce until a peer dies; then the time from that to a
 * working shrunk gang. */
static gang_t* lose_and_shrink(gang_t* g, int64_t* took) {
  static float x[1 << 12], y[1 << 12];
  gang_t* small = NULL;
  gang_status_t s;
  int64_t t0;
  bump(&sh->ready);
  s = gang_all_reduce(g, x, y, 1 << 12, GANG_FLOAT32, GANG_SUM, NULL);
  if (s == GANG_OK) {
    snprintf(sh->error, sizeof sh->error, "an all-reduce with a killed rank succeeded");
    sh->failed = 1;
    _exit(1);
  }
  t0 = now_ms();
  if (g_late) sleep_ms(LATE_MS); /* writing a checkpoint */
  MUST(gang_shrink(g, 0, &small));
  check_sum(small);
  *took = now_ms() - t0;
  return small;
}

/* Recovery and grow, once. */
/* The survivor that is late, or whose gang_shrink dies as its decider. */
static int special_rank(int size, int victim) { return (victim + 1) % size; }

static void episode_rank(const char* backend, int rank, int size, int hosts, int victim,
                         enum mode mode) {
  gang_t *g, *small, *big = NULL;
  int64_t t0;
  place(rank, size, hosts);
  g = create(backend, rank, size);
  check_sum(g);
  if (rank == victim) {
    bump(&sh->ready);
    for (;;) pause();
  }
  if (mode == LATE && rank == special_rank(size, victim)) {
    g_late = 1;
  } else if (mode == DECIDER_DIES) {
    /* It arrives first, so it decides, and dies before its commit. */
    setenv("GANG_FAULT_POINT",
           rank == special_rank(size, victim) ? "shrink.propose" : "shrink.arrive:sleep=100", 1);
  }
  small = lose_and_shrink(g, &sh->recover_ms[rank]);
  bump(&sh->recovered);
  if (mode != KILLED) {
    gang_destroy(small);
    gang_destroy(g);
    _exit(0);
  }
  wait_for(&sh->asked, 1);
  sleep_ms(100); /* the replacement has taken its ticket */
  t0 = now_ms();
  while (big == NULL) MUST(gang_grow(small, 0, &big));
  check_sum(big);
  sh->grow_ms[rank] = now_ms() - t0;
  bump(&sh->grown);
  MUST(gang_barrier(big, NULL));
  gang_destroy(big);
  gang_destroy(small);
  gang_destroy(g);
  _exit(0);
}

/* A replacement: asks to join "bench" (counted in sh->asked) and waits to
 * be admitted. */
static gang_t* join_bench(void) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_options_init(&o);
  o.init_method = url;
  o.timeout_ms = TIMEOUT_MS;
  o.name = "bench";
  bump(&sh->asked);
  MUST(gang_join(&o, &g));
  return g;
}

static void joiner(int size, int hosts, int victim) {
  gang_t* g;
  place(victim, size, hosts);
  g = join_bench();
  check_sum(g);
  MUST(gang_barrier(g, NULL));
  gang_destroy(g);
  _exit(0);
}

static int cmp64(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

static void reap(pid_t* pids, int n) {
  for (int i = 0; i < n; ++i) {
    if (pids[i] > 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
    }
  }
}

/* One episode; the slowest survivor's recovery and grow, or -1. */
static int episode(const char* backend, int size, int hosts, enum mode mode, int64_t* recover,
                   int64_t* grow) {
  pid_t pids[MAX_RANKS + 1];
  const int victim = size / 2 + 1 < size ? size / 2 + 1 : size - 1;
  const int dies = mode == DECIDER_DIES ? special_rank(size, victim) : -1;
  memset(sh, 0, sizeof *sh);
  for (int r = 0; r < size; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      be_child();
      episode_rank(backend, r, size, hosts, victim, mode);
    }
  }
  pids[size] = -1;
  wait_for(&sh->ready, size);
  sleep_ms(200); /* the others are in their all-reduce */
  kill(pids[victim], SIGKILL);
  waitpid(pids[victim], NULL, 0);
  pids[victim] = -1;
  wait_for(&sh->recovered, size - 1 - (dies >= 0));
  pids[size] = -1;
  if (mode == KILLED) {
    pids[size] = fork();
    if (pids[size] == 0) {
      be_child();
      joiner(size, hosts, victim);
    }
    wait_for(&sh->grown, size - 1);
  }
  for (int r = 0; r <= size; ++r) {
    int st = 0;
    if (pids[r] <= 0) continue;
    if (waitpid(pids[r], &st, 0) == pids[r]) pids[r] = -1;
    if (r == dies && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) continue;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) sh->failed = 1;
  }
  reap(pids, size + 1);
  if (sh->failed) return -1;
  *recover = *grow = 0;
  for (int r = 0; r < size; ++r) {
    if (r == victim || r == dies || (mode == LATE && r == special_rank(size, victim))) continue;
    if (sh->recover_ms[r] > *recover) *recover = sh->recover_ms[r];
    if (sh->grow_ms[r] > *grow) *grow = sh->grow_ms[r];
  }
  return 0;
}

static int64_t rss_kb(void) {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int64_t open_fds(void) {
  int64_t n = 0;
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory itself */
}

/* Cycles: ranks 0-2 stay; rank 3 is killed and replaced `cycles` times. */
static void cycle_member(int rank, int cycles) {
  gang_t* g = create("gloo", rank, 4);
  check_sum(g);
  for (int c = 1; c <= cycles; ++c) {
    int64_t took;
    gang_t *small, *big = NULL;
    small = lose_and_shrink(g, &took);
    gang_destroy(g);
    bump(&sh->recovered);
    wait_for(&sh->asked, c);
    sleep_ms(20);
    while (big == NULL) MUST(gang_grow(small, 0, &big));
    gang_destroy(small);
    check_sum(big);
    g = big;
    bump(&sh->grown);
    if (c == 10 || c == cycles / 2 || c == cycles) {
      const int at = c == 10 ? 0 : c == cycles ? 2 : 1;
      sh->rss_kb[rank][at] = rss_kb();
      sh->fds[rank][at] = open_fds();
      sh->heap[rank][at] = (int64_t)mallinfo2().uordblks;
    }
  }
  /* The last rank waits to be killed: no barrier with it. */
  _exit(0);
}

/* The last rank: the first one made by gang_create, the later ones joiners. */
static void cycle_last(int first) {
  gang_t* g = first ? create("gloo", 3, 4) : join_bench();
  check_sum(g);
  bump(&sh->ready);
  for (;;) pause();
}

static int64_t rss_kb_of(pid_t pid) {
  char path[64];
  long pages = 0, resident = 0;
  FILE* f;
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static pid_t g_store_pid = -1;

static int cycles_run(int cycles) {
  pid_t members[3], last;
  int ok = 1;
  memset(sh, 0, sizeof *sh);
  for (int r = 0; r < 3; ++r) {
    members[r] = fork();
    if (members[r] == 0) {
      be_child();
      cycle_member(r, cycles);
    }
  }
  last = fork();
  if (last == 0) {
    be_child();
    cycle_last(1);
  }
  for (int c = 1; c <= cycles && !sh->failed; ++c) {
    /* The three members and the last rank are in place. */
    wait_for(&sh->ready, 4 * c);
    sleep_ms(20);
    kill(last, SIGKILL);
    waitpid(last, NULL, 0);
    wait_for(&sh->recovered, 3 * c);
    last = fork();
    if (last == 0) {
      be_child();
      cycle_last(0);
    }
    wait_for(&sh->grown, 3 * c);
    if (c == 10 || c == cycles / 2 || c == cycles) {
      sh->store_kb[c == 10 ? 0 : c == cycles ? 2 : 1] = rss_kb_of(g_store_pid);
    }
  }
  for (int r = 0; r < 3; ++r) {
    int st = 0;
    waitpid(members[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = 0;
  }
  kill(last, SIGKILL);
  waitpid(last, NULL, 0);
  return ok && !sh->failed ? 0 : -1;
}

static pid_t serve_store(void) {
  int fds[2], port = -1;
  pid_t pid;
  if (pipe(fds) != 0) return -1;
  pid = fork();
  if (pid == 0) {
    gang_store_t* server = NULL;
    be_child();
    close(fds[0]);
    if (gang_store_create("tcp://127.0.0.1:0", 1, TIMEOUT_MS, &server) == GANG_OK)
      port = gang_store_port(server);
    if (write(fds[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
    for (;;) pause();
  }
  close(fds[1]);
  if (read(fds[0], &port, sizeof port) != (ssize_t)sizeof port) port = -1;
  close(fds[0]);
  if (port < 0) return -1;
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  return pid;
}

int main(int argc, char** argv) {
  int size = 8, repeats = 5, cycles = 100, bad = 0;
  static const struct {
    const char* label;
    const char* backend;
    int hosts;
    int64_t target_ms;
  } kinds[] = {
      {"shm", "shm", 1, 1000},
      {"gloo", "gloo", 1, 1000},
      {"shm+gloo, 2 hosts", "auto", 2, 2000},
  };
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      size = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--cycles") == 0 && i + 1 < argc) {
      cycles = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s [--ranks N] [--repeats R] [--cycles C]\n", argv[0]);
      return 2;
    }
  }
  if (size < 4 || size > MAX_RANKS || size % 2 != 0 || repeats < 1 || cycles < 40) {
    fprintf(stderr, "%s: --ranks must be even, 4 to %d; --repeats >= 1; --cycles >= 40 (cycle 10, half and last are sampled)\n",
            argv[0], MAX_RANKS);
    return 2;
  }
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) return 1;
  signal(SIGPIPE, SIG_IGN);
  setenv("GANG_LOG_LEVEL", "error", 0);

  printf("One of %d ranks SIGKILLed in an all-reduce; %d episodes each (ms, the slowest "
         "rank of each episode)\n\n", size, repeats);
  printf("%-20s %26s %26s %8s\n", "backend", "recovery: median / max",
         "grow, 1 joiner: median / max", "target");
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
    int64_t rec[64], gro[64];
    int n = 0;
    for (int e = 0; e < repeats; ++e) {
      pid_t store = serve_store();
      if (store < 0) {
        fprintf(stderr, "cannot serve a store\n");
        return 1;
      }
      if (episode(kinds[k].backend, size, kinds[k].hosts, KILLED, &rec[n], &gro[n]) == 0) {
        ++n;
      } else {
        fprintf(stderr, "%s: an episode failed: %s\n", kinds[k].label, sh->error);
        bad = 1;
      }
      kill(store, SIGKILL);
      waitpid(store, NULL, 0);
    }
    if (n == 0) continue;
    qsort(rec, (size_t)n, sizeof rec[0], cmp64);
    qsort(gro, (size_t)n, sizeof gro[0], cmp64);
    printf("%-20s %17lld / %6lld %17lld / %6lld %5lld ms%s\n", kinds[k].label,
           (long long)rec[n / 2], (long long)rec[n - 1], (long long)gro[n / 2],
           (long long)gro[n - 1], (long long)kinds[k].target_ms,
           rec[n - 1] < kinds[k].target_ms && gro[n - 1] < 1000 ? "  met" : "  NOT MET");
    fflush(stdout);
  }

  printf("\nThe same, with a survivor %d ms late to gang_shrink (waited for), and with "
         "the round's decider killed before its commit (ms, the slowest other survivor)\n\n",
         LATE_MS);
  printf("%-20s %26s %8s %26s %8s\n", "backend", "late: median / max", "target",
         "decider dies: median / max", "target");
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
    int64_t late[64], dec[64], unused;
    int nl = 0, nd = 0;
    for (int e = 0; e < repeats; ++e) {
      for (int m = LATE; m <= DECIDER_DIES; ++m) {
        pid_t store = serve_store();
        int64_t* into = m == LATE ? &late[nl] : &dec[nd];
        if (store < 0) return 1;
        if (episode(kinds[k].backend, size, kinds[k].hosts, (enum mode)m, into, &unused) == 0) {
          m == LATE ? ++nl : ++nd;
        } else {
          fprintf(stderr, "%s: an episode failed: %s\n", kinds[k].label, sh->error);
          bad = 1;
        }
        kill(store, SIGKILL);
        waitpid(store, NULL, 0);
      }
    }
    if (nl == 0 || nd == 0) continue;
    qsort(late, (size_t)nl, sizeof late[0], cmp64);
    qsort(dec, (size_t)nd, sizeof dec[0], cmp64);
    {
      const char* d = getenv("GANG_FAILURE_DETECT_MS");
      const int64_t late_target = LATE_MS + 500;
      const int64_t dec_target = (d != NULL ? atoll(d) : 3000) + 1000;
      printf("%-20s %17lld / %6lld %5lld ms %17lld / %6lld %5lld ms%s\n", kinds[k].label,
             (long long)late[nl / 2], (long long)late[nl - 1], (long long)late_target,
             (long long)dec[nd / 2], (long long)dec[nd - 1], (long long)dec_target,
             late[nl - 1] <= late_target && dec[nd - 1] <= dec_target ? "  met" : "  NOT MET");
    }
    fflush(stdout);
  }

  {
    pid_t store = serve_store();
    const int64_t t0 = now_ms();
    int rc;
    if (store < 0) return 1;
    g_store_pid = store;
    rc = cycles_run(cycles);
    kill(store, SIGKILL);
    waitpid(store, NULL, 0);
    printf("\n%d cycles on 4 ranks (gloo): the last rank SIGKILLed, the others shrink, a "
           "replacement joins, they grow (%.1f s)\n", cycles, (now_ms() - t0) / 1000.0);
    if (rc != 0) {
      fprintf(stderr, "the cycles failed: %s\n", sh->error);
      return 1;
    }
    printf("after cycle 10 / cycle %d / cycle %d:\n", cycles / 2, cycles);
    printf("%-6s %28s %34s %16s\n", "rank", "RSS kB", "heap in use, bytes", "open fds");
    for (int r = 0; r < 3; ++r) {
      printf("%-6d %8lld / %8lld / %8lld %10lld / %10lld / %10lld %4lld / %lld / %lld\n", r,
             (long long)sh->rss_kb[r][0], (long long)sh->rss_kb[r][1],
             (long long)sh->rss_kb[r][2], (long long)sh->heap[r][0],
             (long long)sh->heap[r][1], (long long)sh->heap[r][2], (long long)sh->fds[r][0],
             (long long)sh->fds[r][1], (long long)sh->fds[r][2]);
      /* Bounded: the store client keeps up to 4 idle connections, which
       * the heartbeat's and the members' requests use by turns. */
      if (sh->fds[r][2] > sh->fds[r][0] + 4) bad = 1;
    }
    printf("the store's RSS: %lld / %lld / %lld kB\n", (long long)sh->store_kb[0],
           (long long)sh->store_kb[1], (long long)sh->store_kb[2]);
  }
  return bad;
}
