/* harness.c - forks ranks, serves their store, waits with a wall clock. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 64

static int g_rank = -1;
static void* g_shared = NULL;

int gang_test_rank(void) { return g_rank; }

static void* shared_region(void) {
  if (g_shared == NULL) {
    void* p = mmap(NULL, GANG_TEST_SHARED_BYTES, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      perror("harness: mmap");
      abort();
    }
    g_shared = p;
  }
  return g_shared;
}

volatile void* gang_test_shared(void) { return shared_region(); }

volatile int64_t* gang_test_shared_ints(void) {
  return (volatile int64_t*)shared_region();
}

int64_t gang_test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gang_test_sleep_ms(int64_t ms) {
  struct timespec ts;
  if (ms <= 0) return;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int gang_test_wait_shared(int slot, int64_t value, int64_t timeout_ms) {
  volatile int64_t* ints = gang_test_shared_ints();
  const int64_t deadline = gang_test_now_ms() + timeout_ms;
  while (__atomic_load_n(&ints[slot], __ATOMIC_SEQ_CST) != value) {
    if (gang_test_now_ms() > deadline) return -1;
    gang_test_sleep_ms(2);
  }
  return 0;
}

void gang_test_kill(const pid_t* pids, int rank) {
  if (pids[rank] > 0) kill(pids[rank], SIGKILL);
}

void gang_test_report(const char* file, int line, const char* cond,
                      const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* last = gang_last_error();
  fprintf(stderr, "[rank %d] %s:%d: check `%s` failed: %s%s%s%s\n", g_rank,
          file, line, cond, msg, last[0] ? " (last error: " : "", last,
          last[0] ? ")" : "");
  fflush(stderr);
}

void gang_test_opts_init(gang_test_opts_t* o) {
  memset(o, 0, sizeof *o);
  o->size = 1;
  o->gang_timeout_ms = 30000;
  o->wall_timeout_s = 60;
  o->killed_rank = -1;
  o->killed_rank2 = -1;
}

/* The backend of tests that name none: GANG_TEST_BACKEND, else gloo (the
 * suites run once more on the shm backend this way). */
static const char* default_backend(void) {
  const char* b = getenv("GANG_TEST_BACKEND");
  return b != NULL && *b != '\0' ? b : "gloo";
}

int gang_test_run_ranks(int size, const char* backend, gang_test_fn fn,
                        void* arg, int64_t gang_timeout_ms,
                        int wall_timeout_s) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = size;
  o.backend = backend;
  o.fn = fn;
  o.arg = arg;
  o.gang_timeout_ms = gang_timeout_ms;
  o.wall_timeout_s = wall_timeout_s;
  return gang_test_run(&o);
}

int gang_test_run_procs(int size, gang_test_plain_fn fn, void* arg,
                        int wall_timeout_s) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = size;
  o.plain_fn = fn;
  o.arg = arg;
  o.wall_timeout_s = wall_timeout_s;
  return gang_test_run(&o);
}

/* The child's whole life; never returns. */
static void child_main(const gang_test_opts_t* o, int rank, pid_t parent,
                       const char* url) {
  static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  int rc = 0;
  size_t i;
  g_rank = rank;
  /* cmocka's handlers belong to the parent's test runner. */
  for (i = 0; i < sizeof fatal / sizeof fatal[0]; ++i) signal(fatal[i], SIG_DFL);
  /* A rank never outlives the test that forked it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(99);
  /* GANG_TEST_HOSTS=H: the ranks play H hosts, rank r on host r % H (so a
   * host's ranks are not contiguous), through gang's GANG_HOST_ID. */
  {
    const char* hosts = getenv("GANG_TEST_HOSTS");
    if (hosts != NULL && atoi(hosts) > 0) {
      char id[64];
      snprintf(id, sizeof id, "gang-test-host-%d", rank % atoi(hosts));
      setenv("GANG_HOST_ID", id, 1);
    }
  }
  /* GANG_TEST_HOST_OF=h0,h1,...: rank r plays host h_r, for layouts of
   * hosts of unequal size. */
  {
    const char* of = getenv("GANG_TEST_HOST_OF");
    if (of != NULL && *of != '\0') {
      const char* at = of;
      int r = 0;
      while (r < rank && at != NULL) {
        at = strchr(at, ',');
        if (at != NULL) ++at;
        ++r;
      }
      if (at != NULL) {
        char id[64];
        snprintf(id, sizeof id, "gang-test-host-%d", atoi(at));
        setenv("GANG_HOST_ID", id, 1);
      }
    }
  }

  if (o->plain_fn != NULL) {
    rc = o->plain_fn(rank, o->size, url, o->arg);
  } else {
    gang_store_t* store = NULL;
    gang_t* g = NULL;
    gang_options_t opt;
    gang_status_t s = gang_store_create(url, 0, o->gang_timeout_ms, &store);
    if (s != GANG_OK) {
      fprintf(stderr, "[rank %d] harness: gang_store_create(%s): %s: %s\n",
              rank, url, gang_status_name(s), gang_last_error());
      fflush(stderr);
      _exit(3);
    }
    gang_options_init(&opt);
    opt.backend = o->backend != NULL ? o->backend : default_backend();
    opt.rank = rank;
    opt.size = o->size;
    opt.store = store;
    opt.timeout_ms = o->gang_timeout_ms;
    s = gang_create(&opt, &g);
    if (s != GANG_OK) {
      fprintf(stderr, "[rank %d] harness: gang_create: %s: %s\n", rank,
              gang_status_name(s), gang_last_error());
      fflush(stderr);
      _exit(4);
    }
    rc = o->fn(g, rank, o->size, o->arg);
    s = gang_destroy(g);
    if (s != GANG_OK) {
      fprintf(stderr, "[rank %d] harness: gang_destroy: %s: %s\n", rank,
              gang_status_name(s), gang_last_error());
      if (rc == 0) rc = 5;
    }
    gang_store_destroy(store);
  }
  fflush(stdout);
  fflush(stderr);
  _exit(rc == 0 ? 0 : ((rc & 0xff) != 0 ? (rc & 0xff) : 1));
}

/* Serves the ranks' TCP store from a process of its own, so that the test
 * process stays single-threaded when it forks the ranks (ThreadSanitizer
 * cannot follow a fork of a multi-threaded process). Returns its pid and
 * writes the port, or returns -1. */
static pid_t serve_store(int64_t timeout_ms, int* port) {
  int fds[2];
  pid_t pid;
  const pid_t parent = getpid();
  *port = -1;
  if (pipe(fds) != 0) {
    perror("harness: pipe");
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  if (pid < 0) {
    perror("harness: fork");
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    gang_store_t* server = NULL;
    int p = -1;
    close(fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    if (gang_store_create("tcp://127.0.0.1:0", 1, timeout_ms, &server) ==
        GANG_OK) {
      p = gang_store_port(server);
    } else {
      fprintf(stderr, "harness: cannot serve a store: %s\n",
              gang_last_error());
    }
    if (write(fds[1], &p, sizeof p) != (ssize_t)sizeof p) _exit(1);
    close(fds[1]);
    for (;;) pause(); /* until the test kills it */
  }
  close(fds[1]);
  if (read(fds[0], port, sizeof *port) != (ssize_t)sizeof *port) *port = -1;
  close(fds[0]);
  if (*port < 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return pid;
}

static void stop_store(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
}

int gang_test_run(const gang_test_opts_t* o) {
  pid_t pids[MAX_RANKS];
  int status[MAX_RANKS];
  int done[MAX_RANKS];
  int hung[MAX_RANKS];
  char url[128];
  pid_t server = -1;
  const int64_t timeout_ms = o->gang_timeout_ms > 0 ? o->gang_timeout_ms : 30000;
  const int wall_s = o->wall_timeout_s > 0 ? o->wall_timeout_s : 60;
  gang_test_opts_t opts = *o;
  int size = o->size;
  int remaining, r, failed = 0;
  int64_t deadline;
  const pid_t parent = getpid();

  if (size < 1 || size > MAX_RANKS || (o->fn == NULL) == (o->plain_fn == NULL)) {
    fprintf(stderr, "harness: bad options (size %d)\n", size);
    return 1;
  }
  opts.gang_timeout_ms = timeout_ms;
  memset((void*)shared_region(), 0, GANG_TEST_SHARED_BYTES);

  if (o->store_url != NULL) {
    snprintf(url, sizeof url, "%s", o->store_url);
  } else {
    int port;
    server = serve_store(timeout_ms, &port);
    if (server < 0) return 1;
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
  }

  fflush(stdout);
  fflush(stderr);
  for (r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      int k;
      perror("harness: fork");
      for (k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      for (k = 0; k < r; ++k) waitpid(pids[k], NULL, 0);
      stop_store(server);
      return 1;
    }
    if (pid == 0) child_main(&opts, r, parent, url);
    pids[r] = pid;
    done[r] = 0;
    hung[r] = 0;
    status[r] = 0;
  }

  deadline = gang_test_now_ms() + (int64_t)wall_s * 1000;
  if (o->parent_fn != NULL) o->parent_fn(pids, size, o->arg);

  remaining = size;
  while (remaining > 0) {
    for (r = 0; r < size; ++r) {
      int st;
      pid_t got;
      if (done[r]) continue;
      got = waitpid(pids[r], &st, WNOHANG);
      if (got == pids[r]) {
        done[r] = 1;
        status[r] = st;
        --remaining;
      } else if (got < 0 && errno != EINTR) {
        done[r] = 1;
        status[r] = -1;
        --remaining;
      }
    }
    if (remaining == 0) break;
    if (gang_test_now_ms() > deadline) {
      for (r = 0; r < size; ++r) {
        if (!done[r]) kill(pids[r], SIGKILL);
      }
      for (r = 0; r < size; ++r) {
        if (!done[r]) {
          waitpid(pids[r], NULL, 0);
          done[r] = 1;
          hung[r] = 1;
        }
      }
      break;
    }
    gang_test_sleep_ms(2);
  }

  for (r = 0; r < size; ++r) {
    const int st = status[r];
    if (hung[r]) {
      fprintf(stderr, "harness: rank %d of %d hung; killed after %d s\n", r,
              size, wall_s);
      failed = 1;
    } else if (st == -1) {
      fprintf(stderr, "harness: rank %d of %d: waitpid failed\n", r, size);
      failed = 1;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      /* passed */
    } else if ((r == o->killed_rank || r == o->killed_rank2) && WIFSIGNALED(st) &&
               WTERMSIG(st) == SIGKILL) {
      /* killed on purpose */
    } else if (WIFEXITED(st)) {
      fprintf(stderr, "harness: rank %d of %d failed with exit status %d\n",
              r, size, WEXITSTATUS(st));
      failed = 1;
    } else if (WIFSIGNALED(st)) {
      fprintf(stderr, "harness: rank %d of %d died of signal %d (%s)\n", r,
              size, WTERMSIG(st), strsignal(WTERMSIG(st)));
      failed = 1;
    } else {
      fprintf(stderr, "harness: rank %d of %d ended oddly (status 0x%x)\n",
              r, size, st);
      failed = 1;
    }
  }
  fflush(stderr);
  stop_store(server);
  return failed;
}

gang_parallel_config_t gang_test_parallel_config(gang_test_degrees_t d) {
  gang_parallel_config_t c;
  gang_parallel_config_init(&c);
  c.tp = d.tp ? d.tp : 1;
  c.cp = d.cp ? d.cp : 1;
  c.pp = d.pp ? d.pp : 1;
  c.dp = d.dp ? d.dp : -1;
  c.ep = d.ep ? d.ep : 1;
  c.sdp = d.sdp ? d.sdp : -1;
  c.order = d.order;
  return c;
}
