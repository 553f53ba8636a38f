/*
 * test_store_bounded.c - a long job's store stays bounded: ranks 0-2 stay
 * while rank 3 is SIGKILLed and replaced again and again (the members
 * shrink, then grow to admit a new process), and the number of keys the
 * store holds after the last cycle is no more than after the first few.
 * Every membership change leaves keys behind unless something forgets
 * them: its rounds, tickets, rendezvous, the old gang's records, the
 * backends' own keys, the dead processes' heartbeats.
 *
 * The store is a file store (one file per key), so its keys are counted
 * and, when they grew, named. The members' descriptors and threads are
 * counted too, and stay bounded. The last case plays two hosts, so the
 * gangs are on two levels.
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

#define MEMBERS 3
#define EARLY 4   /* keys are counted after this cycle */
#define CYCLES 12 /* and after this one */
#define WALL_S 120

#define S_READY 0     /* processes of rank 3 that are in their gang */
#define S_RECOVERED 1 /* members that shrank, summed over cycles */
#define S_GROWN 2     /* members that grew, summed over cycles */
#define S_COUNTED 3   /* the cycle whose keys rank 0 counted */
#define S_KEYS 8      /* S_KEYS + i: the keys counted at sample i */
#define S_FDS 16      /* S_FDS + 2 * rank + i: a member's descriptors at sample i */
#define S_THREADS 32  /* S_THREADS + 2 * rank + i: its threads at sample i */

static const char* g_backend = NULL;
static int g_two_hosts = 0; /* ranks 0 and 2 play one host, 1 and 3 another */
static char g_dir[64];
static char g_url[80];

/* The keys the store holds; with `names`, also written there, one a line. */
static int count_keys(FILE* names) {
  DIR* d = opendir(g_dir);
  struct dirent* e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    ++n;
    if (names != NULL) fprintf(names, "%s\n", e->d_name);
  }
  closedir(d);
  return n;
}

static gang_status_t create(int rank, gang_t** g) {
  gang_options_t o;
  gang_options_init(&o);
  o.backend = g_backend;
  o.rank = rank;
  o.size = MEMBERS + 1;
  o.init_method = g_url;
  o.timeout_ms = 20000;
  return gang_create(&o, g);
}

static int all_reduce_ok(gang_t* g) {
  int64_t one = 1, sum = 0;
  CHECK_OK(gang_all_reduce(g, &one, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == gang_size(g), "sum %lld on %d ranks", (long long)sum, gang_size(g));
  return 0;
}

static void bump(int slot) { __atomic_add_fetch(&gang_test_shared_ints()[slot], 1, __ATOMIC_SEQ_CST); }

static int wait_at_least(int slot, int64_t value) {
  const int64_t end = gang_test_now_ms() + 30000;
  while (gang_test_shared_ints()[slot] < value) {
    if (gang_test_now_ms() > end) return -1;
    gang_test_sleep_ms(2);
  }
  return 0;
}

/* The entries of a /proc/self directory. */
static int entries(const char* dir) {
  DIR* d = opendir(dir);
  struct dirent* e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Counts the keys once the forgetting of the last change is done (it runs
 * on a thread of its own): the count after it stood still for 300 ms. */
static int settled_keys(void) {
  int n = count_keys(NULL), last = -1;
  while (n != last) {
    last = n;
    gang_test_sleep_ms(300);
    n = count_keys(NULL);
  }
  return n;
}

static int member(int rank) {
  gang_t* g = NULL;
  CHECK_OK(create(rank, &g));
  CHECK(!g_two_hosts || strchr(gang_backend_name(g), '+') != NULL, "the gang is on %s",
        gang_backend_name(g));
  if (all_reduce_ok(g)) return 1;
  for (int c = 1; c <= CYCLES; ++c) {
    gang_t *small = NULL, *big = NULL;
    int64_t one = 1, sum = 0;
    gang_status_t st = gang_all_reduce(g, &one, &sum, 1, GANG_INT64, GANG_SUM, NULL);
    CHECK(st == GANG_ERR_PEER_LOST || st == GANG_ERR_TIMEOUT || st == GANG_ERR_ABORTED,
          "cycle %d: the all-reduce with rank 3 dead returned %s", c, gang_status_name(st));
    CHECK_OK(gang_shrink(g, 10000, &small));
    CHECK(gang_size(small) == MEMBERS, "cycle %d: shrank to %d", c, gang_size(small));
    CHECK_OK(gang_destroy(g));
    bump(S_RECOVERED);
    while (big == NULL) {
      CHECK_OK(gang_grow(small, 10000, &big));
      if (big == NULL) gang_test_sleep_ms(10);
    }
    CHECK_OK(gang_destroy(small));
    g = big;
    if (all_reduce_ok(g)) return 1;
    bump(S_GROWN);
    if (rank == 0 && (c == EARLY || c == CYCLES)) {
      const int i = c == EARLY ? 0 : 1;
      gang_test_shared_ints()[S_KEYS + i] = settled_keys();
      if (c == EARLY) {
        FILE* f = fopen("early.keys", "w");
        if (f != NULL) {
          count_keys(f);
          fclose(f);
        }
      }
      gang_test_shared_ints()[S_COUNTED] = c;
    }
    /* Rank 3 dies only once its keys are counted; by then the change's
     * own threads are done, and every member counts its descriptors and
     * threads. */
    if (c == EARLY || c == CYCLES) {
      const int i = c == EARLY ? 0 : 1;
      CHECK(wait_at_least(S_COUNTED, c) == 0, "never counted");
      gang_test_shared_ints()[S_FDS + 2 * rank + i] = entries("/proc/self/fd");
      gang_test_shared_ints()[S_THREADS + 2 * rank + i] = entries("/proc/self/task");
    }
  }
  /* The last rank 3 is killed by its spawner: no collective with it. */
  return 0;
}

/* A process in rank 3's place: the first from gang_create, the later ones
 * gang_join. Waits to be killed. */
static void stand_in(int first) {
  gang_t* g = NULL;
  gang_status_t st;
  if (first) {
    st = create(MEMBERS, &g);
  } else {
    gang_options_t o;
    gang_options_init(&o);
    o.backend = g_backend;
    o.init_method = g_url;
    o.timeout_ms = 20000;
    st = gang_join(&o, &g);
  }
  if (st != GANG_OK || all_reduce_ok(g)) _exit(1);
  bump(S_READY);
  for (;;) pause();
}

/* Rank 3 of the harness spawns the stand-ins and kills each in turn. */
static int spawner(void) {
  pid_t in = fork();
  if (in == 0) stand_in(1);
  for (int c = 1; c <= CYCLES; ++c) {
    CHECK(wait_at_least(S_READY, c) == 0, "cycle %d: rank 3 never came in", c);
    CHECK(wait_at_least(S_GROWN, MEMBERS * (c - 1)) == 0, "cycle %d: never grew", c);
    CHECK(wait_at_least(S_COUNTED, c == EARLY + 1 ? EARLY : 0) == 0, "never counted");
    gang_test_sleep_ms(20);
    kill(in, SIGKILL);
    waitpid(in, NULL, 0);
    CHECK(wait_at_least(S_RECOVERED, MEMBERS * c) == 0, "cycle %d: never shrank", c);
    in = fork();
    if (in == 0) stand_in(0);
  }
  CHECK(wait_at_least(S_COUNTED, CYCLES) == 0, "never counted");
  kill(in, SIGKILL);
  waitpid(in, NULL, 0);
  return 0;
}

static int proc(int rank, int size, const char* url, void* arg) {
  (void)size;
  (void)url;
  (void)arg;
  /* Rank 3's stand-ins inherit its host. */
  if (g_two_hosts) setenv("GANG_HOST_ID", rank % 2 ? "bounded-host-1" : "bounded-host-0", 1);
  return rank < MEMBERS ? member(rank) : spawner();
}

static void run(const char* backend) {
  gang_test_opts_t o;
  int early, late;
  char cmd[128];
  g_backend = backend;
  snprintf(g_dir, sizeof g_dir, "/tmp/gang-store-bounded.%d", (int)getpid());
  snprintf(g_url, sizeof g_url, "file://%s", g_dir);
  /* Membership changes at test speed. */
  setenv("GANG_FAILURE_DETECT_MS", "1000", 1);
  gang_test_opts_init(&o);
  o.size = MEMBERS + 1;
  o.plain_fn = proc;
  o.wall_timeout_s = WALL_S;
  assert_int_equal(gang_test_run(&o), 0);
  early = (int)gang_test_shared_ints()[S_KEYS];
  late = (int)gang_test_shared_ints()[S_KEYS + 1];
  printf("%s%s: %d keys in the store after cycle %d, %d after cycle %d\n",
         backend ? backend : "auto", g_two_hosts ? " on two hosts" : "", early, EARLY, late, CYCLES);
  if (late > early) {
    FILE* f = fopen("late.keys", "w");
    if (f != NULL) {
      count_keys(f);
      fclose(f);
    }
    printf("keys the later cycles left (in late.keys, not in early.keys):\n");
    fflush(stdout);
    if (system("sort early.keys > early.sorted; sort late.keys | comm -13 early.sorted - "
               "| head -40") != 0) {
      printf("(cannot list them)\n");
    }
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s early.keys late.keys early.sorted", g_dir);
  if (system(cmd) != 0) printf("cannot remove %s\n", g_dir);
  unsetenv("GANG_FAILURE_DETECT_MS");
  assert_true(early > 0);
  assert_true(late <= early);
  /* A member's descriptors and threads: the store client's idle pool and
   * the threads forgetting keys come and go, by a few. */
  for (int r = 0; r < MEMBERS; ++r) {
    const int64_t* fds = (const int64_t*)&gang_test_shared_ints()[S_FDS + 2 * r];
    const int64_t* threads = (const int64_t*)&gang_test_shared_ints()[S_THREADS + 2 * r];
    printf("rank %d: %lld descriptors and %lld threads after cycle %d, %lld and %lld after "
           "cycle %d\n", r, (long long)fds[0], (long long)threads[0], EARLY, (long long)fds[1],
           (long long)threads[1], CYCLES);
    assert_true(fds[0] > 0 && threads[0] > 0);
    assert_true(fds[1] <= fds[0] + 2);
    assert_true(threads[1] <= threads[0] + 2);
  }
}

static void test_gloo(void** s) {
  (void)s;
  run("gloo");
}

static void test_auto(void** s) {
  (void)s;
  run(NULL);
}

/* Two levels before and after every shrink (2 + 2 ranks, then 2 + 1). */
static void test_two_levels(void** s) {
  (void)s;
  g_two_hosts = 1;
  run(NULL);
  g_two_hosts = 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gloo),
      cmocka_unit_test(test_auto),
      cmocka_unit_test(test_two_levels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
