/*
 * test_hang.c - hangs that say who and where.
 *
 * - A rank stopped (SIGSTOP) before an all-reduce is named in the timeout
 *   of the ranks that wait for it, on shm and on gloo.
 * - While ranks wait longer than GANG_WAIT_WARN_S they say so on stderr,
 *   naming the operation (and, on shm, the rank they wait for).
 * - SIGURG makes every rank of a running 4-rank job dump its flight
 *   recorder; gang-trace (argv[1]) reads the dumps and names the rank that
 *   is one operation behind.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

enum { SH_READY = 0, SH_DONE = 1, SH_MSG = 8 };
#define MSG_BYTES 2048

static const char* g_trace_tool;
static char g_dir[64];

static char* shared_text(int rank) {
  return (char*)gang_test_shared() + SH_MSG * 8 + (size_t)rank * MSG_BYTES;
}

static char* slurp(const char* path) {
  static char buf[1 << 16];
  FILE* f = fopen(path, "r");
  size_t n;
  if (!f) return NULL;
  n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* ---- a stopped rank is named ------------------------------------------- */

static int stopped_rank(gang_t* g, int rank, int size, void* arg) {
  float x = 1.0f;
  gang_status_t s;
  (void)arg;
  (void)size;
  CHECK_OK(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL));
  if (rank == 2) {
    __atomic_store_n(&gang_test_shared_ints()[SH_READY], 1, __ATOMIC_SEQ_CST);
    for (;;) gang_test_sleep_ms(100); /* stopped, then killed, here */
  }
  s = gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL);
  CHECK(s == GANG_ERR_TIMEOUT, "got %s: %s", gang_status_name(s), gang_last_error());
  snprintf(shared_text(rank), MSG_BYTES, "%s", gang_last_error());
  __atomic_add_fetch(&gang_test_shared_ints()[SH_DONE], 1, __ATOMIC_SEQ_CST);
  return 0;
}

static void stop_rank_2(const pid_t* pids, int size, void* arg) {
  (void)size;
  (void)arg;
  if (gang_test_wait_shared(SH_READY, 1, 20000) != 0) return;
  kill(pids[2], SIGSTOP);
  gang_test_wait_shared(SH_DONE, 2, 30000);
  kill(pids[2], SIGKILL);
  kill(pids[2], SIGCONT);
}

static void run_stopped(const char* backend) {
  gang_test_opts_t o;
  int r;
  gang_test_opts_init(&o);
  o.size = 3;
  o.backend = backend;
  o.fn = stopped_rank;
  o.parent_fn = stop_rank_2;
  o.killed_rank = 2;
  o.gang_timeout_ms = 2000;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  for (r = 0; r < 2; ++r) {
    const char* m = shared_text(r);
    printf("%s: rank %d's timeout: %s\n", backend, r, m);
    if (strstr(m, "rank 2") == NULL) fail_msg("rank 2 is not named: %s", m);
    if (strstr(m, "GANG_DEBUG=detail") == NULL) fail_msg("no hint: %s", m);
  }
}

static void test_stopped_rank_named(void** s) {
  (void)s;
  run_stopped("shm");
  run_stopped("gloo");
}

/* ---- a rank behind: warnings, and dumps read by gang-trace ------------- */

/* Ranks 0, 1 and 3 run 3 all-reduces and wait in the 4th; rank 2 does
 * "work" for 3 s after its 3rd. Every rank's stderr goes to a file. */
static int behind_rank(gang_t* g, int rank, int size, void* arg) {
  char path[128];
  float x = 1.0f;
  int i, fd;
  (void)arg;
  (void)size;
  snprintf(path, sizeof path, "%s/stderr-%d.txt", g_dir, rank);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0, "open %s", path);
  dup2(fd, 2);
  close(fd);
  for (i = 0; i < 3; ++i) {
    CHECK_OK(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL));
  }
  __atomic_add_fetch(&gang_test_shared_ints()[SH_READY], 1, __ATOMIC_SEQ_CST);
  if (rank == 2) gang_test_sleep_ms(3000);
  CHECK_OK(gang_all_reduce(g, &x, &x, 1, GANG_FLOAT32, GANG_SUM, NULL));
  return 0;
}

static void ask_for_dumps(const pid_t* pids, int size, void* arg) {
  int r;
  (void)arg;
  if (gang_test_wait_shared(SH_READY, size, 20000) != 0) return;
  gang_test_sleep_ms(1500); /* the three wait in #4, rank 2 works */
  for (r = 0; r < size; ++r) kill(pids[r], SIGURG);
}

static void run_behind(const char* backend) {
  gang_test_opts_t o;
  char pattern[128], cmd[512], path[128];
  const char* text;
  FILE* p;
  static char report[8192];
  size_t n;
  int r, status;
  snprintf(pattern, sizeof pattern, "%s/trace-%%r.txt", g_dir);
  setenv("GANG_FLIGHT_RECORDER", pattern, 1);
  setenv("GANG_WAIT_WARN_S", "0.5", 1);
  setenv("GANG_LOG_LEVEL", "warn", 1);
  gang_test_opts_init(&o);
  o.size = 4;
  o.backend = backend;
  o.fn = behind_rank;
  o.parent_fn = ask_for_dumps;
  o.gang_timeout_ms = 20000;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_FLIGHT_RECORDER");
  unsetenv("GANG_WAIT_WARN_S");
  setenv("GANG_LOG_LEVEL", "error", 1);

  /* The waiting ranks warned, naming the operation. */
  for (r = 0; r < 4; ++r) {
    if (r == 2) continue;
    snprintf(path, sizeof path, "%s/stderr-%d.txt", g_dir, r);
    text = slurp(path);
    if (!text || !strstr(text, "has waited") || !strstr(text, "all_reduce #4")) {
      fail_msg("%s: rank %d did not warn while it waited:\n%s", backend, r,
               text ? text : "(no file)");
    }
    if (strcmp(backend, "shm") == 0 && !strstr(text, "rank 2")) {
      fail_msg("shm: rank %d's warning names no rank:\n%s", r, text);
    }
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/stderr-2.txt", g_dir);
  unlink(path);

  /* gang-trace names rank 2 as behind. */
  snprintf(cmd, sizeof cmd, "%s %s", g_trace_tool, g_dir);
  p = popen(cmd, "r");
  assert_non_null(p);
  n = fread(report, 1, sizeof report - 1, p);
  report[n] = '\0';
  status = pclose(p);
  printf("%s: gang-trace %s\n%s", backend, g_dir, report);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 1) {
    fail_msg("gang-trace exited %d, not 1 (ranks behind)", status);
  }
  if (!strstr(report, "rank 2: idle after gang_all_reduce #3") ||
      !strstr(report, "BEHIND by 1") || !strstr(report, "rank 0: in gang_all_reduce #4")) {
    fail_msg("the report does not name rank 2 as one behind");
  }
  for (r = 0; r < 4; ++r) {
    snprintf(path, sizeof path, "%s/trace-%d.txt", g_dir, r);
    unlink(path);
  }
}

static void test_behind_warned_and_traced(void** s) {
  (void)s;
  run_behind("shm");
  run_behind("gloo");
}

/* ---- a failed attach reaches every rank -------------------------------- */

/* Rank 2 runs as another user, so it cannot open rank 0's shm segment:
 * every rank's gang_create fails within a second, naming rank 2. */
static int attach_fails(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  gang_status_t s;
  int64_t t0, ms;
  (void)arg;
  if (rank == 2) {
    CHECK(setgid(65534) == 0 && setuid(65534) == 0, "cannot become nobody");
  }
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  gang_options_init(&o);
  o.backend = "shm";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = 20000;
  t0 = gang_test_now_ms();
  s = gang_create(&o, &g);
  ms = gang_test_now_ms() - t0;
  snprintf(shared_text(rank), MSG_BYTES, "%s (%lld ms): %s", gang_status_name(s),
           (long long)ms, s == GANG_OK ? "" : gang_last_error());
  CHECK(s != GANG_OK, "gang_create succeeded");
  if (g) gang_destroy(g);
  gang_store_destroy(store);
  return 0;
}

static void test_failed_attach_reaches_all(void** s) {
  gang_test_opts_t o;
  int r;
  (void)s;
  if (geteuid() != 0) {
    skip(); /* needs root to run a rank as another user */
    return;
  }
  setenv("GANG_STORE_ALLOW_USERS", "any", 1); /* the store lets nobody in */
  gang_test_opts_init(&o);
  o.size = 3;
  o.plain_fn = attach_fails;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  unsetenv("GANG_STORE_ALLOW_USERS");
  for (r = 0; r < 3; ++r) {
    const char* m = shared_text(r);
    long long ms = 0;
    printf("failed attach: rank %d: %s\n", r, m);
    if (sscanf(strchr(m, '(') + 1, "%lld", &ms) != 1 || ms > 1000) {
      fail_msg("rank %d took too long: %s", r, m);
    }
    if (!strstr(m, "rank 2")) fail_msg("rank %d's error names no rank 2: %s", r, m);
  }
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stopped_rank_named),
      cmocka_unit_test(test_behind_warned_and_traced),
      cmocka_unit_test(test_failed_attach_reaches_all),
  };
  int rc;
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH-TO-gang-trace\n", argv[0]);
    return 2;
  }
  g_trace_tool = argv[1];
  snprintf(g_dir, sizeof g_dir, "/tmp/gang-hang-XXXXXX");
  if (!mkdtemp(g_dir)) return 1;
  setenv("GANG_LOG_LEVEL", "error", 1);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  rmdir(g_dir);
  return rc;
}
