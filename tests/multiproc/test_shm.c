/*
 * test_shm.c - what is particular to the shm backend: it says so in
 * gang_backend_name, refuses nothing of the collective surface, fails a
 * mismatched collective with GANG_ERR_MISMATCH on every rank, and leaves
 * nothing in /dev/shm, even when a rank is killed in the middle.
 * (The collective matrix and the failure tests also run on shm:
 * multiproc.shm.*.)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define WALL_S 60

/* Entries of /dev/shm, as one string; "" when it cannot be read. */
static void list_dev_shm(char* out, size_t n) {
  DIR* d = opendir("/dev/shm");
  struct dirent* e;
  out[0] = '\0';
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (strlen(out) + strlen(e->d_name) + 2 < n) {
      strcat(out, e->d_name);
      strcat(out, "\n");
    }
  }
  closedir(d);
}

static int rank_basic(gang_t* g, int rank, int size, void* arg) {
  double x[3] = {rank, 1, 2}, y[3];
  (void)arg;
  CHECK(strcmp(gang_backend_name(g), "shm") == 0, "backend %s", gang_backend_name(g));
  CHECK_OK(gang_all_reduce(g, x, y, 3, GANG_FLOAT64, GANG_SUM, NULL));
  CHECK(y[0] == size * (size - 1) / 2.0 && y[1] == size, "sum %g %g", y[0], y[1]);
  return 0;
}

static int rank_mismatch(gang_t* g, int rank, int size, void* arg) {
  float x[4000] = {0}, y[4000];
  const size_t count = rank == 0 ? 1000 : 2000;
  gang_status_t s;
  (void)size;
  (void)arg;
  s = gang_all_reduce(g, x, y, count, GANG_FLOAT32, GANG_SUM, NULL);
  CHECK(s == GANG_ERR_MISMATCH, "got %s: %s", gang_status_name(s), gang_last_error());
  CHECK(strstr(gang_last_error(), "count") != NULL, "message: %s", gang_last_error());
  return 0;
}

static int rank_killed(gang_t* g, int rank, int size, void* arg) {
  int64_t x = 1, y = 0;
  gang_status_t s;
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 1) {
    kill(getpid(), SIGKILL);
  }
  gang_test_sleep_ms(100);
  s = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  CHECK(s == GANG_ERR_PEER_LOST, "got %s: %s", gang_status_name(s), gang_last_error());
  return 0;
}

static void test_shm_gang(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(1, "shm", rank_basic, NULL, 20000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_basic, NULL, 20000, WALL_S), 0);
}

static void test_shm_mismatch(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_mismatch, NULL, 20000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_mismatch, NULL, 20000, WALL_S), 0);
}

static void test_shm_leaves_nothing(void** s) {
  static char before[65536], after[65536];
  gang_test_opts_t o;
  (void)s;
  list_dev_shm(before, sizeof before);
  assert_int_equal(gang_test_run_ranks(4, "shm", rank_basic, NULL, 20000, WALL_S), 0);
  gang_test_opts_init(&o);
  o.size = 3;
  o.backend = "shm";
  o.fn = rank_killed;
  o.killed_rank = 1;
  o.gang_timeout_ms = 20000;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
  list_dev_shm(after, sizeof after);
  assert_string_equal(before, after);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm_gang),
      cmocka_unit_test(test_shm_mismatch),
      cmocka_unit_test(test_shm_leaves_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
