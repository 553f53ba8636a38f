/* Creation at a width this machine has no processes for: N ranks of one
 * gloo gang, as threads of P processes (N / P each), every rank with its
 * own gang, listening port, store connection and pairs, as if each were a
 * process. Each rank creates the gang and runs one 8-byte all-reduce.
 * Prints, from the last rank's call of gang_create to the last rank's
 * return, the creation's time, and the all-reduce's (the slowest rank's).
 *
 *   creation_threads N [P] [PORT] [BACKEND]
 *                         (P: 16; PORT: 29500 + N % 1000, also for 0;
 *                          BACKEND: gloo)
 *
 * With BACKEND "auto", each process is a host of its own (GANG_HOST_ID),
 * so the gang is on two levels: shm among a process's ranks, gloo among
 * the P hosts' leaders.
 *
 * The ranks share the processes' cores and a few process-wide threads, so
 * the figure is a stand-in for N processes, stated as such: what it
 * measures is what grows with N at one place (the store, rank 0, the
 * kernel's ports), not what each rank does on its own core. */
#define _GNU_SOURCE
#include <gang/gang.h>

#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  double called;    /* ms, CLOCK_MONOTONIC */
  double returned;  /* ms */
  double reduced;   /* ms: the all-reduce's return */
  int status;
} Times;

static int g_size;
static int g_port;
static const char* g_backend = "gloo";
static char g_url[64]; /* this process's: its own loopback address */
static Times* g_times; /* shared by every process */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void* one_rank(void* arg) {
  const int rank = (int)(intptr_t)arg;
  Times* t = &g_times[rank];
  gang_options_t o;
  gang_options_init(&o);
  o.backend = g_backend;
  o.rank = rank;
  o.size = g_size;
  o.init_method = g_url;
  o.timeout_ms = 600000;
  gang_t* g = NULL;
  t->called = now_ms();
  gang_status_t s = gang_create(&o, &g);
  t->returned = now_ms();
  if (s != GANG_OK) {
    fprintf(stderr, "rank %d: gang_create: %s\n", rank, gang_last_error());
    t->status = (int)s;
    return NULL;
  }
  float x[2] = {1.0f, (float)rank};
  s = gang_all_reduce(g, x, x, 2, GANG_FLOAT32, GANG_SUM, NULL);
  t->reduced = now_ms();
  if (s != GANG_OK || x[0] != (float)g_size) {
    fprintf(stderr, "rank %d: all_reduce: %s\n", rank, s != GANG_OK ? gang_last_error()
                                                                      : "wrong sum");
    t->status = s != GANG_OK ? (int)s : -1;
  }
  /* Every rank of this process is done before any destroys its gang. */
  return g;
}

/* The CPU time of this process's threads but the calling one: the store
 * server's, without what forking and reaping the ranks' processes costs the
 * main thread (as much as the server's own at 512 processes). */
static double other_threads_cpu_ms(void) {
  const long tick = sysconf(_SC_CLK_TCK);
  const pid_t self = (pid_t)syscall(SYS_gettid);
  double ms = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    const int tid = atoi(e->d_name);
    if (tid <= 0 || tid == self) continue;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "tid (comm) state ...": utime and stime are the 12th and 13th
     * fields after the comm's closing parenthesis. */
    const char* p = strrchr(buf, ')');
    unsigned long long utime = 0, stime = 0;
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                            &utime, &stime) != 2) {
      continue;
    }
    ms += (double)(utime + stime) * 1e3 / (double)tick;
  }
  closedir(d);
  return ms;
}

static int run_process(int process, int first, int count) {
  /* Each process plays a host of its own: 127.0.0.(p + 1), where its
   * ranks listen (a gang listens on the address it reaches the store at
   * when that is loopback), so that the ranks of one host share a port
   * space as on a real machine, not the whole gang's. */
  snprintf(g_url, sizeof g_url, "tcp://127.0.0.%d:%d", process % 250 + 1, g_port);
  if (strcmp(g_backend, "auto") == 0) {
    char host[32];
    snprintf(host, sizeof host, "host%d", process);
    setenv("GANG_HOST_ID", host, 1);
  }
  pthread_t* threads = calloc((size_t)count, sizeof *threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  for (int i = 0; i < count; ++i) {
    if (pthread_create(&threads[i], &attr, one_rank, (void*)(intptr_t)(first + i)) != 0) {
      fprintf(stderr, "rank %d: no thread\n", first + i);
      return 1;
    }
  }
  gang_t** gangs = calloc((size_t)count, sizeof *gangs);
  for (int i = 0; i < count; ++i) pthread_join(threads[i], (void**)&gangs[i]);
  /* Exits without destroying the gangs: the other processes' ranks may
   * still be in their all-reduce, and the measurement is done. */
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s N [P] [PORT] [BACKEND]\n", argv[0]);
    return 2;
  }
  g_size = atoi(argv[1]);
  const int procs = argc > 2 ? atoi(argv[2]) : 16;
  g_port = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 29500 + g_size % 1000;
  if (argc > 4) g_backend = argv[4];
  if (g_size < 2 || procs < 1 || procs > g_size) {
    fprintf(stderr, "N must be at least 2 and P between 1 and N\n");
    return 2;
  }
  struct rlimit fds;
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0) {
    fds.rlim_cur = fds.rlim_max;
    setrlimit(RLIMIT_NOFILE, &fds);
  }
  /* The store is served here, on every address, sized as rank 0 sizes
   * the one it serves for a job of N ranks; rank 0 finds the port taken
   * and joins it. What this process's other threads spend is the server's
   * work alone. */
  char n4[32], n_4[32], url[64];
  snprintf(n4, sizeof n4, "%d", 4 * g_size);
  snprintf(n_4, sizeof n_4, "%d", g_size / 4 > 64 ? g_size / 4 : 64);
  setenv("GANG_STORE_MAX_CONNECTIONS", n4, 0);
  setenv("GANG_STORE_MAX_PENDING_CONNECTIONS", n_4, 0);
  /* Served on every address, so with a token (the ranks inherit it). */
  char token[64];
  snprintf(token, sizeof token, "creation-threads-%ld", (long)getpid());
  setenv("GANG_STORE_TOKEN", token, 0);
  snprintf(url, sizeof url, "tcp://0.0.0.0:%d", g_port);
  gang_store_t* server = NULL;
  if (gang_store_create(url, 1, 600000, &server) != GANG_OK) {
    fprintf(stderr, "store server: %s\n", gang_last_error());
    return 1;
  }
  g_times = mmap(NULL, (size_t)g_size * sizeof(Times), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_times == MAP_FAILED) return 1;
  memset(g_times, 0, (size_t)g_size * sizeof(Times));
  pid_t* pids = calloc((size_t)procs, sizeof *pids);
  for (int p = 0; p < procs; ++p) {
    const int first = (int)((long)g_size * p / procs);
    const int last = (int)((long)g_size * (p + 1) / procs);
    pids[p] = fork();
    if (pids[p] == 0) _exit(run_process(p, first, last - first));
  }
  int failed = 0;
  for (int p = 0; p < procs; ++p) {
    int st = 0;
    waitpid(pids[p], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  double first_call = 1e300, last_call = 0, last_return = 0, last_reduced = 0;
  for (int r = 0; r < g_size; ++r) {
    const Times* t = &g_times[r];
    if (t->status != 0 || t->returned == 0) failed = 1;
    if (t->called < first_call) first_call = t->called;
    if (t->called > last_call) last_call = t->called;
    if (t->returned > last_return) last_return = t->returned;
    if (t->reduced > last_reduced) last_reduced = t->reduced;
  }
  const double server_cpu_ms = other_threads_cpu_ms();
  printf("%6d ranks in %3d processes: create %9.1f ms (%9.1f ms from the first call), "
         "then all_reduce 8 B %9.1f ms; the store server's CPU %8.1f ms%s\n",
         g_size, procs, last_return - last_call, last_return - first_call,
         last_reduced - last_return, server_cpu_ms, failed ? "  FAILED" : "");
  gang_store_destroy(server);
  return failed;
}
