/*
 * test_shared_device.c - the gloo gangs of a process share one event loop.
 *
 * 3 ranks create two root gloo gangs on the same interface: the second
 * opens no event loop of its own (Gloo's loop is an epoll descriptor and a
 * thread that wakes every 10 ms; a process of many gangs kept one ticking
 * for each). Both gangs work, in turns; the first destroyed, the second
 * still does. Then each rank forks a child while its gang lives, and the
 * children make a gang of their own: a child inherits the parent's record
 * of open devices but not their threads, so it must open its own (a
 * device handed down would never connect, and the children's creation
 * would time out).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
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

#define RANKS 3
#define TIMEOUT_MS 20000

/* The process's epoll descriptors. */
static int event_loops(void) {
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[64];
    ssize_t len;
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = '\0';
      if (strcmp(target, "anon_inode:[eventpoll]") == 0) ++n;
    }
  }
  closedir(d);
  return n;
}

static gang_t* create(gang_store_t* store, const char* name, int rank, int size) {
  gang_options_t o;
  gang_t* g = NULL;
  gang_options_init(&o);
  o.backend = "gloo";
  o.name = name;
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = TIMEOUT_MS;
  return gang_create(&o, &g) == GANG_OK ? g : NULL;
}

/* An all-reduce of rank + 1 that checks its sum. */
static int sums(gang_t* g, int size) {
  int64_t x = gang_rank(g) + 1, y = 0;
  if (gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL) != GANG_OK) return 0;
  return y == (int64_t)size * (size + 1) / 2;
}

/* A forked child: a gang of the children, through a store of its own. */
static int child(int rank, int size, const char* url) {
  gang_store_t* store = NULL;
  gang_t* g;
  int ok;
  if (gang_store_create(url, 0, TIMEOUT_MS, &store) != GANG_OK) return 2;
  g = create(store, "children", rank, size);
  if (g == NULL) {
    fprintf(stderr, "child of rank %d: gang_create: %s\n", rank, gang_last_error());
    return 3;
  }
  ok = sums(g, size);
  gang_destroy(g);
  gang_store_destroy(store);
  return ok ? 0 : 4;
}

static int proc_rank(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_t *a, *b;
  int loops_a, loops_b, st = 0;
  pid_t pid;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, TIMEOUT_MS, &store));
  a = create(store, "first", rank, size);
  CHECK(a != NULL, "gang_create (first): %s", gang_last_error());
  loops_a = event_loops();
  b = create(store, "second", rank, size);
  CHECK(b != NULL, "gang_create (second): %s", gang_last_error());
  loops_b = event_loops();
  CHECK(loops_a >= 1, "a gloo gang with no event loop (%d epoll descriptors)", loops_a);
  CHECK(loops_b == loops_a,
        "a second gloo gang on the same interface opened %d event loops of its own",
        loops_b - loops_a);
  CHECK(sums(a, size), "the first gang's all-reduce: %s", gang_last_error());
  CHECK(sums(b, size), "the second gang's all-reduce: %s", gang_last_error());
  CHECK(sums(a, size), "the first gang's second all-reduce: %s", gang_last_error());
  CHECK_OK(gang_destroy(a));
  CHECK(sums(b, size), "the second gang, the first destroyed: %s", gang_last_error());

  pid = fork();
  CHECK(pid >= 0, "fork failed");
  if (pid == 0) _exit(child(rank, size, url));
  CHECK(sums(b, size), "the parent's gang beside its child: %s", gang_last_error());
  CHECK(waitpid(pid, &st, 0) == pid, "waitpid failed");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "the child of rank %d (a gang of the children) failed: status %d", rank, st);
  CHECK(sums(b, size), "the parent's gang after its child: %s", gang_last_error());
  CHECK_OK(gang_destroy(b));
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static void test_gangs_share_an_event_loop(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(RANKS, proc_rank, NULL, 120), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gangs_share_an_event_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
