/*
 * test_lazy_pairs.c - a Gloo gang connects only the ranks that talk.
 *
 * 16 ranks, and 12, create a gloo gang. Creation ends with a barrier
 * (above 8 ranks by recursive doubling: with p the largest power of two
 * up to n, each of the first p ranks talks to rank r ^ 2^k in round k, and
 * the ranks from p on to the rank p below them), so a new gang has its
 * listening port and exactly those peers connected: log2 p of them, one
 * more for a rank that folds or is folded into. An 8-byte all-reduce (the
 * same doubling above 8 ranks) and another barrier need no others; an
 * all-to-all then connects all n - 1. Connections are counted as the
 * socket descriptors of the process that are not connections to the
 * store, between barriers (a rank that ran ahead into the all-to-all would
 * connect to a rank still counting).
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
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

static int g_store_port;

/* The peers a rank of a gang of `size` (more than 8) talks to in a
 * barrier: the doubling's. */
static int doubling_peers(int rank, int size) {
  int p = 1, rounds = 0;
  while (p * 2 <= size) {
    p *= 2;
    ++rounds;
  }
  if (rank >= p) return 1;
  return rounds + (rank + p < size ? 1 : 0);
}

/* Whether socket `inode` is a connection to the store (the store client
 * keeps a pool of them, which threads of gang's own grow and shrink). */
static int to_store(unsigned long inode) {
  FILE* f = fopen("/proc/net/tcp", "r");
  char line[512];
  int found = 0;
  if (f == NULL) return 0;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    unsigned local_port, remote_port;
    unsigned long ino;
    if (sscanf(line, " %*d: %*x:%x %*x:%x %*x %*x:%*x %*x:%*x %*x %*u %*d %lu", &local_port,
               &remote_port, &ino) == 3) {
      found = ino == inode && (int)remote_port == g_store_port;
    }
  }
  fclose(f);
  return found;
}

/* The process's sockets, less its connections to the store. */
static int sockets(void) {
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    char path[300], target[64];
    unsigned long inode;
    ssize_t len;
    snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
    len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = '\0';
      if (sscanf(target, "socket:[%lu]", &inode) == 1 && !to_store(inode)) ++n;
    }
  }
  closedir(d);
  return n;
}

static int proc_rank(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  int64_t x = rank + 1, y = 0;
  int64_t all_in[16], all_out[16];
  int before, created, after_ops, after_all;
  int i;
  (void)arg;
  g_store_port = atoi(strrchr(url, ':') + 1);
  CHECK_OK(gang_store_create(url, 0, 60000, &store));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = 60000;
  before = sockets();
  CHECK_OK(gang_create(&o, &g));
  created = sockets() - before - 1; /* the listening port */
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == (int64_t)size * (size + 1) / 2, "sum %lld", (long long)y);
  CHECK_OK(gang_barrier(g, NULL));
  after_ops = sockets() - before - 1;
  /* No rank connects anew (all_to_all) before every rank has counted. */
  CHECK_OK(gang_barrier(g, NULL));
  for (i = 0; i < size; ++i) all_in[i] = rank * 100 + i;
  CHECK_OK(gang_all_to_all(g, all_in, all_out, 1, GANG_INT64, NULL));
  for (i = 0; i < size; ++i) {
    CHECK(all_out[i] == i * 100 + rank, "all_to_all[%d] = %lld", i, (long long)all_out[i]);
  }
  /* Every rank's connections are made once all are past the all_to_all;
   * none closes before all have counted. */
  CHECK_OK(gang_barrier(g, NULL));
  after_all = sockets() - before - 1;
  CHECK_OK(gang_barrier(g, NULL));
  if (getenv("DBG") || rank == 0) {
    fprintf(stderr, "rank %d peers connected: %d after gang_create, %d after "
            "all_reduce and barrier, %d after all_to_all\n", rank, created, after_ops,
            after_all);
  }
  CHECK(created == doubling_peers(rank, size),
        "gang_create connected %d peers, expected %d", created, doubling_peers(rank, size));
  CHECK(after_ops == created, "all_reduce and barrier connected %d more peers",
        after_ops - created);
  CHECK(after_all == size - 1, "an all-to-all left %d peers connected, not %d",
        after_all, size - 1);
  CHECK_OK(gang_destroy(g));
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static void test_only_ranks_that_talk_connect(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(16, proc_rank, NULL, 120), 0);
}

static void test_only_ranks_that_talk_connect_off_powers_of_two(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(12, proc_rank, NULL, 120), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_only_ranks_that_talk_connect),
      cmocka_unit_test(test_only_ranks_that_talk_connect_off_powers_of_two),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
