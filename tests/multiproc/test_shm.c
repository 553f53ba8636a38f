/*
 * test_shm.c - what is particular to the shm backend: it says so in
 * gang_backend_name, refuses nothing of the collective surface, fails a
 * mismatched collective with GANG_ERR_MISMATCH on every rank, and leaves
 * nothing in /dev/shm, even when a rank is killed in the middle; large
 * broadcasts and gathers give the same results by default, with single
 * copies for every gather from 32 KiB (GANG_SHM_SINGLE_COPY=always: one
 * copy, straight from the owner's buffer; 3 ranks on a 2-core machine
 * would otherwise never take it) and with none (=0, a copy in and out);
 * large all-reduces, split so each rank reduces its share, are exact;
 * small broadcasts, which do not meet, stay right when roots run ahead.
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
#include <sys/wait.h>
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

/* Value j of rank r's block. */
static uint32_t val(int r, size_t j) { return (uint32_t)(r * 1000003u + j * 7u + 1u); }

/* Broadcast, all_gather (out of and in place), all_gatherv and gather of
 * blocks from 40 KiB to 1 MiB + a few bytes, every element checked. */
static int rank_large(gang_t* g, int rank, int size, void* arg) {
  static const size_t kElems[] = {10240, 262147};
  size_t i, j;
  (void)arg;
  for (i = 0; i < sizeof kElems / sizeof kElems[0]; ++i) {
    const size_t n = kElems[i];
    uint32_t* mine = malloc(n * 4);
    uint32_t* all = malloc(n * 4 * (size_t)size);
    size_t counts[8], total = 0;
    int r, root = size - 1;
    CHECK(mine != NULL && all != NULL, "out of memory");
    for (j = 0; j < n; ++j) mine[j] = rank == root ? val(root, j) : 0;
    CHECK_OK(gang_broadcast(g, mine, n, GANG_UINT32, root, NULL));
    for (j = 0; j < n; ++j) CHECK(mine[j] == val(root, j), "broadcast[%zu]", j);

    for (j = 0; j < n; ++j) mine[j] = val(rank, j);
    CHECK_OK(gang_all_gather(g, mine, all, n, GANG_UINT32, NULL));
    for (r = 0; r < size; ++r) {
      for (j = 0; j < n; ++j) CHECK(all[(size_t)r * n + j] == val(r, j), "all_gather %d[%zu]", r, j);
    }
    memset(all, 0, n * 4 * (size_t)size);
    memcpy(all + (size_t)rank * n, mine, n * 4);
    CHECK_OK(gang_all_gather(g, all + (size_t)rank * n, all, n, GANG_UINT32, NULL));
    for (r = 0; r < size; ++r) {
      for (j = 0; j < n; ++j) CHECK(all[(size_t)r * n + j] == val(r, j), "in place %d[%zu]", r, j);
    }

    for (r = 0; r < size; ++r) {
      counts[r] = n - (size_t)r * 1000;
      total += counts[r];
    }
    memset(all, 0, n * 4 * (size_t)size);
    CHECK_OK(gang_all_gatherv(g, mine, counts[rank], all, counts, (size_t)size,
                              GANG_UINT32, NULL));
    for (r = 0, total = 0; r < size; total += counts[r], ++r) {
      for (j = 0; j < counts[r]; ++j) CHECK(all[total + j] == val(r, j), "all_gatherv %d[%zu]", r, j);
    }

    memset(all, 0xab, n * 4 * (size_t)size);
    CHECK_OK(gang_gather(g, mine, all, n, GANG_UINT32, 0, NULL));
    for (r = 0; r < size; ++r) {
      for (j = 0; j < n; ++j) {
        const uint32_t want = rank == 0 ? val(r, j) : 0xabababab;
        CHECK(all[(size_t)r * n + j] == want, "gather %d[%zu]", r, j);
      }
    }

    /* Large all-reduces are split: each rank reduces its share of every
     * chunk; odd counts leave the last share short. */
    for (j = 0; j < n; ++j) mine[j] = val(rank, j);
    CHECK_OK(gang_all_reduce(g, mine, all, n, GANG_UINT32, GANG_SUM, NULL));
    CHECK_OK(gang_all_reduce(g, mine, mine, n, GANG_UINT32, GANG_MAX, NULL));
    for (j = 0; j < n; ++j) {
      uint32_t sum = 0;
      for (r = 0; r < size; ++r) sum += val(r, j);
      CHECK(all[j] == sum, "all_reduce sum [%zu] = %u, want %u", j, all[j], sum);
      CHECK(mine[j] == val(size - 1, j), "in place all_reduce max [%zu]", j);
    }
    free(mine);
    free(all);
  }
  return 0;
}

/* Small broadcasts do not meet: a root may run a broadcast ahead of slow
 * peers. 300 broadcasts of 1 to 4000 elements from changing roots, slow
 * ranks now and then, an all-reduce and a large broadcast in between; every
 * value checked. */
static int rank_posted(gang_t* g, int rank, int size, void* arg) {
  static uint32_t buf[4000];
  int i;
  (void)arg;
  for (i = 0; i < 300; ++i) {
    const int root = (i / 3) % size;
    const size_t n = 1 + (size_t)(i * 37) % 4000;
    size_t j;
    for (j = 0; j < n; ++j) buf[j] = rank == root ? val(i, j) : 0;
    if ((i + rank) % 7 == 0) usleep(300);
    CHECK_OK(gang_broadcast(g, buf, n, GANG_UINT32, root, NULL));
    for (j = 0; j < n; ++j) CHECK(buf[j] == val(i, j), "broadcast %d [%zu] = %u", i, j, buf[j]);
    if (i % 10 == 9) {
      int64_t x = rank, y = 0;
      CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
      CHECK(y == (int64_t)size * (size - 1) / 2, "sum %lld", (long long)y);
    }
  }
  return 0;
}

static void test_shm_posted_broadcasts(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_posted, NULL, 30000, WALL_S), 0);
  assert_int_equal(gang_test_run_ranks(4, "shm", rank_posted, NULL, 30000, WALL_S), 0);
}

static void test_shm_large(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_large, NULL, 30000, WALL_S), 0);
  setenv("GANG_SHM_SINGLE_COPY", "always", 1);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_large, NULL, 30000, WALL_S), 0);
  setenv("GANG_SHM_SINGLE_COPY", "0", 1);
  assert_int_equal(gang_test_run_ranks(3, "shm", rank_large, NULL, 30000, WALL_S), 0);
  unsetenv("GANG_SHM_SINGLE_COPY");
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

/* A peer that exited but was not reaped yet (a zombie: its parent waits
 * late, as Python's multiprocessing and some containers' PID 1 do) is
 * gone: the survivors fail with PEER_LOST at once, not at the timeout.
 * Rank 2's gang lives in a child of rank 2's process, which exits while
 * that process sleeps without waiting for it. */
#define ZOMBIE_TIMEOUT_MS 20000
#define ZOMBIE_LIMIT_MS 3000
#define SLOT_ZOMBIE 7

static int zombie_rank(int rank, int size, const char* url) {
  gang_options_t o;
  gang_t* g = NULL;
  int64_t x = 1, y = 0, t0;
  gang_status_t st;
  gang_options_init(&o);
  o.backend = "shm";
  o.rank = rank;
  o.size = size;
  o.init_method = url;
  o.timeout_ms = ZOMBIE_TIMEOUT_MS;
  CHECK_OK(gang_create(&o, &g));
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 2) _exit(0); /* its parent does not reap it yet */
  CHECK(gang_test_wait_shared(SLOT_ZOMBIE, 1, 10000) == 0, "rank 2 never exited");
  t0 = gang_test_now_ms();
  st = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  CHECK(st == GANG_ERR_PEER_LOST, "got %s after %lld ms: %s", gang_status_name(st),
        (long long)(gang_test_now_ms() - t0), gang_last_error());
  CHECK(gang_test_now_ms() - t0 <= ZOMBIE_LIMIT_MS, "PEER_LOST came after %lld ms",
        (long long)(gang_test_now_ms() - t0));
  CHECK(strstr(gang_last_error(), "rank 2") != NULL, "message: %s", gang_last_error());
  gang_destroy(g);
  return 0;
}

static int proc_zombie(int rank, int size, const char* url, void* arg) {
  (void)arg;
  if (rank == 2) {
    int status = 0;
    char stat[64], line[512];
    FILE* f;
    const pid_t child = fork();
    CHECK(child >= 0, "fork failed");
    if (child == 0) _exit(zombie_rank(rank, size, url));
    /* Wait until the child is a zombie, say so, and keep it one while the
     * others find it gone. */
    snprintf(stat, sizeof stat, "/proc/%d/stat", (int)child);
    for (;;) {
      const char* state = NULL;
      f = fopen(stat, "r");
      CHECK(f != NULL, "no %s", stat);
      if (fgets(line, sizeof line, f) != NULL) state = strrchr(line, ')');
      fclose(f);
      if (state != NULL && state[2] == 'Z') break;
      gang_test_sleep_ms(5);
    }
    gang_test_shared_ints()[SLOT_ZOMBIE] = 1;
    gang_test_sleep_ms(ZOMBIE_LIMIT_MS + 2000);
    CHECK(waitpid(child, &status, 0) == child, "waitpid");
    return 0;
  }
  return zombie_rank(rank, size, url);
}

static void test_shm_zombie_peer(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, proc_zombie, NULL, WALL_S), 0);
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
      cmocka_unit_test(test_shm_large),
      cmocka_unit_test(test_shm_posted_broadcasts),
      cmocka_unit_test(test_shm_leaves_nothing),
      cmocka_unit_test(test_shm_zombie_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
