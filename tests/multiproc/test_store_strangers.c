/*
 * test_store_strangers.c - the store of a job started without gangrun
 * keeps strangers out.
 *
 * Rank 0 serves the job's store on tcp://127.0.0.1 (no token unless a
 * test sets one) and the other ranks reach it through options.init_method,
 * as a job started with GANG_INIT_METHOD does.
 *
 *   other_user_refused  a 3-rank job whose rank 2 runs as nobody (uid
 *                       65534): rank 2 is refused at once, told that the
 *                       store belongs to another user and how to share it;
 *                       ranks 0 and 1 fail, never with a sum
 *   same_user           the same job, every rank ours: it runs
 *   other_user_token    rank 2 as nobody, every rank with the same
 *                       GANG_STORE_TOKEN: it runs
 *   other_user_allowed  rank 2 as nobody, the server with
 *                       GANG_STORE_ALLOW_USERS=65534: it runs
 *   squatted_port       nobody serves a store (taking anyone) on the
 *                       job's port before rank 0 can: rank 0, finding the
 *                       port taken, refuses that store as another user's
 *                       rather than join it, and the others fail without
 *                       rank 0
 *   idle_same_user      1100 connections opened (by us) and left silent
 *   idle_other_user     ... by nobody
 *   idle_token          ... to a server with a token, which they lack
 *                       before the ranks connect: the job is made and
 *                       all-reduces right, and rank 0's log has a few
 *                       lines about them, not hundreds
 *   half_closed_stranger  nobody connects to a non-loopback address of the
 *   closed_stranger     host, sends a set and a get, and half-closes (or
 *                       closes) before the server looks: refused, the set
 *                       not done, the secret not read
 *
 * The tests that need another user exit 77 unless run as root.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define NOBODY 65534
#define RANKS 3
#define IDLE 1100
#define TOKEN "strangers-T0ken"

/* Shared slots. */
enum {
  SLOT_PORT = 0,    /* the store's port, once rank 0 serves it */
  SLOT_CROWD = 1,   /* connections the crowd opened (-1: it failed) */
  SLOT_GO = 2,      /* 1 once the other ranks may connect */
  SLOT_DONE = 3     /* ranks finished */
};

typedef struct {
  int stranger;             /* the rank that runs as nobody, or -1 */
  int refused;              /* it must be refused (else: it joins) */
  const char* server_env;   /* "NAME=VALUE" for rank 0 only, or NULL */
  const char* rank_env;     /* "NAME=VALUE" for every rank, or NULL */
  int idle;                 /* silent connections opened first */
  int idle_as_nobody;
  int squatter;             /* nobody serves the port first */
  int64_t timeout_ms;       /* the gang's */
  char log_path[64];        /* rank 0's stderr */
} plan_t;

static int g_started;
static int g_skipped;
static char g_skip_reason[256];

static void begin(void) { ++g_started; }

static void need_root(void) {
  if (geteuid() != 0) {
    snprintf(g_skip_reason, sizeof g_skip_reason,
             "needs root, to run a process as uid %d", NOBODY);
    ++g_skipped;
    skip();
  }
}

static int become_nobody(void) {
  CHECK(setgroups(0, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0,
        "cannot become uid %d: %s", NOBODY, strerror(errno));
  return 0;
}

static int wait_slot_nonzero(int slot, int64_t timeout_ms) {
  const int64_t end = gang_test_now_ms() + timeout_ms;
  while (gang_test_shared_ints()[slot] == 0) {
    if (gang_test_now_ms() > end) return -1;
    gang_test_sleep_ms(2);
  }
  return 0;
}

/* The crowd: opens p->idle connections to the store, says nothing on them,
 * and keeps them open until every rank is done. */
static int crowd(const plan_t* p) {
  struct rlimit rl;
  struct sockaddr_in addr;
  int* fds;
  int opened = 0, i;
  volatile int64_t* shared = gang_test_shared_ints();
  if (wait_slot_nonzero(SLOT_PORT, 20000) != 0) {
    shared[SLOT_CROWD] = -1;
    CHECK(0, "rank 0 never served the store");
  }
  /* Room for the connections, before giving up root. */
  CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
  if (rl.rlim_cur < (rlim_t)p->idle + 64) {
    rl.rlim_cur = (rlim_t)p->idle + 64;
    if (rl.rlim_max < rl.rlim_cur) rl.rlim_max = rl.rlim_cur;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      shared[SLOT_CROWD] = -1;
      CHECK(0, "cannot allow %d descriptors: %s", p->idle + 64, strerror(errno));
    }
  }
  if (p->idle_as_nobody && become_nobody() != 0) {
    shared[SLOT_CROWD] = -1;
    return 1;
  }
  fds = calloc((size_t)p->idle, sizeof *fds);
  CHECK(fds != NULL, "calloc");
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)shared[SLOT_PORT]);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (i = 0; i < p->idle; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fds[i] < 0 || connect(fds[i], (struct sockaddr*)&addr, sizeof addr) != 0) {
      fprintf(stderr, "[crowd] connection %d: %s\n", i, strerror(errno));
      if (fds[i] >= 0) close(fds[i]);
      break;
    }
    ++opened;
  }
  shared[SLOT_CROWD] = opened > 0 ? opened : -1;
  /* Silent until the job is over (or would have been). */
  {
    const int64_t end = gang_test_now_ms() + p->timeout_ms + 10000;
    while (shared[SLOT_DONE] < RANKS && gang_test_now_ms() < end) {
      gang_test_sleep_ms(10);
    }
  }
  for (i = 0; i < opened; ++i) close(fds[i]);
  free(fds);
  CHECK(opened == p->idle, "only %d of %d connections opened", opened, p->idle);
  return 0;
}

/* The squatter: serves a store as nobody, taking anyone, until every rank
 * is done. */
static int squatter(const plan_t* p) {
  volatile int64_t* shared = gang_test_shared_ints();
  gang_store_t* s = NULL;
  const int64_t end = gang_test_now_ms() + p->timeout_ms + 10000;
  if (become_nobody() != 0) {
    shared[SLOT_PORT] = -1;
    return 1;
  }
  setenv("GANG_STORE_ALLOW_USERS", "any", 1);
  if (gang_store_create("tcp://127.0.0.1:0", 1, p->timeout_ms, &s) != GANG_OK) {
    shared[SLOT_PORT] = -1;
    CHECK(0, "the squatter cannot serve: %s", gang_last_error());
  }
  shared[SLOT_PORT] = gang_store_port(s);
  while (shared[SLOT_DONE] < RANKS && gang_test_now_ms() < end) gang_test_sleep_ms(10);
  gang_store_destroy(s);
  return 0;
}

/* Every rank meets through the port nobody took first. */
static int squatted_rank(int rank, const plan_t* p) {
  volatile int64_t* shared = gang_test_shared_ints();
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t st;
  char url[64];
  const char* e;
  CHECK(wait_slot_nonzero(SLOT_PORT, 20000) == 0 && shared[SLOT_PORT] > 0,
        "the squatter never served");
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", (int)shared[SLOT_PORT]);
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = RANKS;
  o.timeout_ms = p->timeout_ms;
  o.init_method = url; /* rank 0 finds the port taken, and joins as a client */
  st = gang_create(&o, &g);
  __sync_fetch_and_add(&shared[SLOT_DONE], 1);
  e = gang_last_error();
  if (st == GANG_OK) gang_destroy(g);
  CHECK(st != GANG_OK, "rank %d made a gang through another user's store", rank);
  if (rank == 0) {
    CHECK(st == GANG_ERR_STORE, "rank 0: %s", gang_status_name(st));
    CHECK(strstr(e, "another user") != NULL && strstr(e, "GANG_STORE_TOKEN") != NULL,
          "the refusal does not say whose store it is: %s", e);
    fprintf(stderr, "[rank 0] refused as expected: %s\n", e);
  }
  return 0;
}

/* Sends stderr to p->log_path (the store's log), and at GANG_LOG_LEVEL=warn,
 * so its lines can be counted; returns the real stderr. */
static int capture_log(const plan_t* p) {
  const int saved = dup(2);
  const int fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) return -1;
  close(fd);
  setenv("GANG_LOG_LEVEL", "warn", 1);
  return saved;
}

/* Puts stderr back, prints what the store logged, and counts its lines. */
static int store_log_lines(const plan_t* p, int saved, const char* must_have) {
  char line[1024];
  int lines = 0, found = must_have == NULL;
  FILE* f;
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  f = fopen(p->log_path, "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "store server:") == NULL) continue;
    ++lines;
    if (lines <= 6) fprintf(stderr, "[rank 0 log] %s", line);
    if (must_have != NULL && strstr(line, must_have) != NULL) found = 1;
  }
  fclose(f);
  unlink(p->log_path);
  fprintf(stderr, "[rank 0] the store logged %d lines\n", lines);
  return found ? lines : -2;
}

static int sum_all(gang_t* g, int rank, int64_t* out) {
  int64_t x = rank + 1;
  CHECK_OK(gang_all_reduce(g, &x, out, 1, GANG_INT64, GANG_SUM, NULL));
  return 0;
}

static int job_rank(int rank, const plan_t* p) {
  volatile int64_t* shared = gang_test_shared_ints();
  gang_store_t* server = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t st;
  char url[64];
  int saved_stderr = -1;
  int64_t t0, elapsed, sum = 0;
  int rc = 0, lines = 0;
  char e[2048];
  if (p->rank_env != NULL) putenv((char*)p->rank_env);
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = RANKS;
  o.timeout_ms = p->timeout_ms;
  if (rank == 0) {
    if (p->server_env != NULL) putenv((char*)p->server_env);
    saved_stderr = capture_log(p);
    CHECK(saved_stderr >= 0, "cannot capture rank 0's stderr");
    st = gang_store_create("tcp://127.0.0.1:0", 1, p->timeout_ms, &server);
    if (st != GANG_OK) {
      store_log_lines(p, saved_stderr, NULL);
      CHECK_OK(st);
    }
    shared[SLOT_PORT] = gang_store_port(server);
    if (p->idle > 0) {
      /* The crowd first: every connection it opens is in the server's
       * queue before any rank connects. */
      if (wait_slot_nonzero(SLOT_CROWD, 60000) != 0 || shared[SLOT_CROWD] < 0) {
        store_log_lines(p, saved_stderr, NULL);
        CHECK(0, "the crowd did not connect");
      }
    }
    shared[SLOT_GO] = 1;
    o.store = server;
  } else {
    CHECK(wait_slot_nonzero(SLOT_GO, 60000) == 0, "rank 0 never let us go");
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", (int)shared[SLOT_PORT]);
    o.init_method = url;
    if (rank == p->stranger && become_nobody() != 0) return 1;
  }

  t0 = gang_test_now_ms();
  st = gang_create(&o, &g);
  elapsed = gang_test_now_ms() - t0;
  snprintf(e, sizeof e, "%s", gang_last_error());
  if (st == GANG_OK) {
    rc = sum_all(g, rank, &sum);
    gang_destroy(g);
  }
  __sync_fetch_and_add(&shared[SLOT_DONE], 1);
  if (rank == 0) {
    /* Served until every rank is done with it; then stderr is ours again
     * (for the checks below too). */
    const int64_t end = gang_test_now_ms() + p->timeout_ms;
    while (shared[SLOT_DONE] < RANKS && gang_test_now_ms() < end) gang_test_sleep_ms(5);
    gang_store_destroy(server);
    lines = store_log_lines(p, saved_stderr,
                            p->stranger >= 0 && p->refused ? "uid 65534" : NULL);
  }
  if (rank == p->stranger && p->refused) {
    CHECK(st == GANG_ERR_STORE, "another user's rank got %s (sum %lld)",
          gang_status_name(st), (long long)sum);
    CHECK(strstr(e, "another user") != NULL && strstr(e, "GANG_STORE_TOKEN") != NULL &&
              strstr(e, "GANG_STORE_ALLOW_USERS") != NULL,
          "the refusal does not say whose store it is and how to share it: %s", e);
    CHECK(elapsed < p->timeout_ms / 2, "the refusal took %lld ms", (long long)elapsed);
    fprintf(stderr, "[rank %d] refused as expected: %s\n", rank, e);
  } else if (p->stranger >= 0 && p->refused) {
    /* The rank that never came: an error, never a result. */
    CHECK(st != GANG_OK, "the job was made with another user's process as rank %d (sum %lld)",
          p->stranger, (long long)sum);
  } else {
    CHECK(st == GANG_OK, "gang_create: %s: %s", gang_status_name(st), e);
    CHECK(rc == 0, "the all-reduce failed");
    CHECK(sum == RANKS * (RANKS + 1) / 2, "sum %lld, expected %d", (long long)sum,
          RANKS * (RANKS + 1) / 2);
  }
  if (rank == 0) {
    CHECK(lines != -2, "the store's log does not name the refused uid");
    CHECK(lines >= 0 && lines <= 12, "the store logged %d lines", lines);
  }
  return 0;
}

static int proc(int rank, int size, const char* url, void* arg) {
  const plan_t* p = arg;
  (void)size;
  (void)url;
  if (p->squatter) return rank < RANKS ? squatted_rank(rank, p) : squatter(p);
  return rank < RANKS ? job_rank(rank, p) : crowd(p);
}

static void run(plan_t* p) {
  gang_test_opts_t o;
  begin();
  snprintf(p->log_path, sizeof p->log_path, "/tmp/gang-strangers-%d.log", (int)getpid());
  gang_test_opts_init(&o);
  o.size = RANKS + (p->idle > 0 || p->squatter ? 1 : 0);
  o.plain_fn = proc;
  o.arg = p;
  o.wall_timeout_s = (int)(p->timeout_ms / 1000) + 60;
  /* The ranks are served by rank 0, not the harness. */
  o.store_url = "tcp://127.0.0.1:1";
  assert_int_equal(gang_test_run(&o), 0);
}

static plan_t plan(void) {
  plan_t p;
  memset(&p, 0, sizeof p);
  p.stranger = -1;
  p.timeout_ms = 20000;
  return p;
}

static void test_other_user_refused(void** state) {
  plan_t p = plan();
  (void)state;
  need_root();
  p.stranger = 2;
  p.refused = 1;
  p.timeout_ms = 4000;
  run(&p);
}

static void test_same_user(void** state) {
  plan_t p = plan();
  (void)state;
  run(&p);
}

static void test_other_user_token(void** state) {
  plan_t p = plan();
  (void)state;
  need_root();
  p.stranger = 2;
  p.rank_env = "GANG_STORE_TOKEN=" TOKEN;
  run(&p);
}

static void test_other_user_allowed(void** state) {
  plan_t p = plan();
  (void)state;
  need_root();
  p.stranger = 2;
  p.server_env = "GANG_STORE_ALLOW_USERS=65534";
  run(&p);
}

static void test_squatted_port(void** state) {
  plan_t p = plan();
  (void)state;
  need_root();
  p.squatter = 1;
  p.timeout_ms = 5000;
  run(&p);
}

static void test_idle_same_user(void** state) {
  plan_t p = plan();
  (void)state;
  p.idle = IDLE;
  run(&p);
}

static void test_idle_other_user(void** state) {
  plan_t p = plan();
  (void)state;
  need_root();
  p.idle = IDLE;
  p.idle_as_nobody = 1;
  run(&p);
}

static void test_idle_token(void** state) {
  plan_t p = plan();
  (void)state;
  p.idle = IDLE;
  p.rank_env = "GANG_STORE_TOKEN=" TOKEN;
  run(&p);
}

/* ---- the owner check fails closed ---------------------------------------
 *
 * A tokenless store serving on every interface; another user of the host
 * connects to a non-loopback address of the host (a second address on
 * lo), sends a set and a get, and half-closes (shutdown SHUT_WR) or closes
 * at once, before the server looks at it: its socket is then not
 * connected, which once let it pass as another machine's. It must be
 * refused: the set never happens, and the get reads nothing.
 *
 * Each test has an address of its own, and removes only an address it
 * added: CTest runs them side by side, and one test removing the other's
 * address made the other's connect fail (Network is unreachable). */

/* A request frame (tcp_protocol.h): magic, version, op, key length, value
 * length, key, value. */
static size_t frame(unsigned char* out, int op, const char* key, const char* value) {
  const uint32_t k = (uint32_t)strlen(key);
  const uint64_t v = value ? strlen(value) : 0;
  size_t n = 0;
  out[n++] = 'g';
  out[n++] = 'S';
  out[n++] = 1;
  out[n++] = (unsigned char)op;
  for (int i = 0; i < 4; ++i) out[n++] = (unsigned char)(k >> (8 * i));
  for (int i = 0; i < 8; ++i) out[n++] = (unsigned char)(v >> (8 * i));
  memcpy(out + n, key, k);
  n += k;
  if (v) memcpy(out + n, value, v);
  return n + v;
}

/* The stranger, as nobody: 0 when it learned nothing. */
static int stranger(const char* address, int port, int close_at_once) {
  unsigned char req[256], got[4096];
  struct sockaddr_in addr;
  size_t n = 0, have = 0;
  ssize_t r;
  int fd;
  if (become_nobody() != 0) return 1;
  fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0, "socket: %s", strerror(errno));
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  CHECK(inet_pton(AF_INET, address, &addr.sin_addr) == 1, "bad address %s", address);
  CHECK(connect(fd, (struct sockaddr*)&addr, sizeof addr) == 0, "connect: %s", strerror(errno));
  n += frame(req + n, 1, "planted", "by-a-stranger");
  n += frame(req + n, 2, "secret", NULL);
  CHECK(write(fd, req, n) == (ssize_t)n, "write: %s", strerror(errno));
  if (close_at_once) {
    close(fd);
    return 0;
  }
  shutdown(fd, SHUT_WR);
  {
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  while (have < sizeof got && (r = read(fd, got + have, sizeof got - have)) > 0) have += (size_t)r;
  close(fd);
  CHECK(memmem(got, have, "s3cr3t", 6) == NULL, "the stranger read the secret back");
  return 0;
}

static void stranger_on_another_address(const char* address, int close_at_once) {
  gang_store_t* server = NULL;
  void* v = NULL;
  size_t vn = 0;
  char cmd[160];
  int port, status = 0, added;
  pid_t pid;
  need_root();
  begin();
  snprintf(cmd, sizeof cmd, "ip addr add %s/32 dev lo 2>/dev/null", address);
  added = system(cmd) == 0;
  snprintf(cmd, sizeof cmd, "ip addr show dev lo | grep -q ' %s/'", address);
  if (!added && system(cmd) != 0) {
    snprintf(g_skip_reason, sizeof g_skip_reason,
             "cannot add the address %s to lo (ip addr add)", address);
    ++g_skipped;
    skip();
  }
  assert_int_equal(gang_store_create("tcp://0.0.0.0:0", 1, 2000, &server), GANG_OK);
  port = gang_store_port(server);
  assert_int_equal(gang_store_set(server, "secret", "s3cr3t", 6), GANG_OK);
  pid = fork();
  if (pid == 0) _exit(stranger(address, port, close_at_once));
  assert_true(pid > 0);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  gang_test_sleep_ms(300); /* whatever the server was to do with it, done */
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(gang_store_get(server, "planted", &v, &vn), GANG_ERR_TIMEOUT);
  gang_free(v);
  assert_int_equal(gang_store_destroy(server), GANG_OK);
  snprintf(cmd, sizeof cmd, "ip addr del %s/32 dev lo 2>/dev/null", address);
  if (added && system(cmd) != 0) fprintf(stderr, "cannot remove %s from lo\n", address);
}

static void test_half_closed_stranger(void** state) {
  (void)state;
  stranger_on_another_address("10.213.7.1", 0);
}

static void test_closed_stranger(void** state) {
  (void)state;
  stranger_on_another_address("10.213.7.2", 1);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_other_user_refused),
      cmocka_unit_test(test_same_user),
      cmocka_unit_test(test_other_user_token),
      cmocka_unit_test(test_other_user_allowed),
      cmocka_unit_test(test_squatted_port),
      cmocka_unit_test(test_idle_same_user),
      cmocka_unit_test(test_idle_other_user),
      cmocka_unit_test(test_idle_token),
      cmocka_unit_test(test_half_closed_stranger),
      cmocka_unit_test(test_closed_stranger),
  };
  int rc;
  unsetenv("GANG_STORE_TOKEN");
  unsetenv("GANG_STORE_ALLOW_USERS");
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 && g_started > 0 && g_skipped == g_started) {
    fprintf(stderr, "SKIP: %s\n", g_skip_reason);
    return GANG_TEST_SKIP;
  }
  return rc;
}
