/*
 * test_shrink.c - gang_shrink: the survivors of a lost rank agree on who is
 * left and go on in a new gang. A rank is SIGKILLed in an all-reduce, in a
 * barrier, in a send/recv exchange; two at once; the survivors shrink,
 * check the new gang's rank, size, name and root ranks, and all-reduce in
 * it (the sum of the survivors' root ranks). Who is left is decided by
 * liveness: a survivor that calls gang_shrink a second after the others
 * (writing a checkpoint) is waited for and stays, the others' recovery
 * taking its delay and little more; one that comes only after the others'
 * timeout is excluded and says so; so is a rank SIGSTOPped through the
 * agreement and SIGCONTed after it, on every call of the old gang, while
 * the new gang's results stay right. A rank SIGKILLed inside gang_shrink
 * itself is left out by the others.
 * The backend is GANG_TEST_BACKEND (gloo by default; CTest runs shm too).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define TIMEOUT_MS 5000
#define WALL_S 90
/* The others' gang_shrink waits for an alive rank this long at most (their
 * shrink timeout less the decider's margin); later than this is excluded. */
#define SHRINK_TIMEOUT_MS 4000
#define LATE_WAITED_MS 2500
/* How long a survivor waits for a late rank beyond its delay, at most (the
 * target is half a second; two cores running every rank add to it). */
#define LATE_SLACK_MS 1500

#define SLOT_READY 1     /* ranks in their blocking call */
#define SLOT_RECOVER 2   /* the slowest recovery seen, ms */
#define SLOT_IN_SHRINK 3 /* the rank killed inside gang_shrink is in it */
#define SLOT_SHRUNK 4    /* survivors with their new gang */
#define SLOT_WOKE 5      /* the SIGCONTed rank made its calls */

enum where { IN_ALL_REDUCE, IN_BARRIER, IN_P2P };

typedef struct shrink_case {
  int victims[2];
  int nvictims;
  enum where where;
  int late;  /* a survivor that calls gang_shrink late_ms after the others */
  int late_ms; /* below the others' timeout: waited for; beyond it: excluded */
  int stopped;        /* SIGSTOPped until the others shrank: excluded */
  int dies_in_shrink; /* SIGKILLed inside gang_shrink */
  /* The round's decider (it calls gang_shrink first) dies at this point of
   * the protocol (GANG_FAULT_POINT), or NULL. */
  const char* decider_dies_at;
  int decider;
} shrink_case_t;

#define NONE (-1)

static int is_victim(const shrink_case_t* c, int rank) {
  for (int i = 0; i < c->nvictims; ++i)
    if (c->victims[i] == rank) return 1;
  return 0;
}

/* Not in the shrunk gang. */
static int left_out(const shrink_case_t* c, int rank) {
  return is_victim(c, rank) || (rank == c->late && c->late_ms > LATE_WAITED_MS) ||
         rank == c->stopped || rank == c->dies_in_shrink ||
         (c->decider_dies_at != NULL && rank == c->decider);
}

static int survivors(const shrink_case_t* c, int size) {
  int n = 0;
  for (int r = 0; r < size; ++r) n += !left_out(c, r);
  return n;
}

static void parent_kill(const pid_t* pids, int size, void* arg) {
  const shrink_case_t* c = (const shrink_case_t*)arg;
  if (gang_test_wait_shared(SLOT_READY, size, 20000) != 0)
    fprintf(stderr, "parent: the ranks never got ready; killing anyway\n");
  gang_test_sleep_ms(300); /* the others are blocked in their call */
  if (c->stopped != NONE) kill(pids[c->stopped], SIGSTOP);
  for (int i = 0; i < c->nvictims; ++i) gang_test_kill(pids, c->victims[i]);
  if (c->dies_in_shrink != NONE) {
    if (gang_test_wait_shared(SLOT_IN_SHRINK, 1, 20000) != 0)
      fprintf(stderr, "parent: rank %d never entered gang_shrink\n", c->dies_in_shrink);
    gang_test_sleep_ms(100); /* counted in, the round not yet decided */
    gang_test_kill(pids, c->dies_in_shrink);
  }
  if (c->stopped != NONE) {
    if (gang_test_wait_shared(SLOT_SHRUNK, survivors(c, size), 30000) != 0)
      fprintf(stderr, "parent: the survivors never shrank\n");
    kill(pids[c->stopped], SIGCONT);
  }
}

/* The SIGSTOPped rank, once woken: every call on the old gang, and
 * gang_shrink, fails saying it was excluded. */
static int wake_excluded(gang_t* g, int size, const shrink_case_t* c) {
  float x[4] = {0}, y[4];
  gang_t* small = NULL;
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_READY], 1, __ATOMIC_SEQ_CST);
  /* Stopped by the parent in here until the others have their gang. */
  if (gang_test_wait_shared(SLOT_SHRUNK, survivors(c, size), 60000) != 0) {
    fprintf(stderr, "the survivors never shrank\n");
    return 1;
  }
  for (int i = 0; i < 2; ++i) {
    gang_status_t s = gang_all_reduce(g, x, y, 4, GANG_FLOAT32, GANG_SUM, NULL);
    CHECK(s != GANG_OK, "an excluded rank's all-reduce on the old gang succeeded");
    CHECK(strstr(gang_last_error(), "excluded") != NULL,
          "call %d of the excluded rank does not say so: %s", i, gang_last_error());
  }
  CHECK(gang_barrier(g, NULL) != GANG_OK, "an excluded rank's barrier succeeded");
  CHECK(strstr(gang_last_error(), "excluded") != NULL,
        "the excluded rank's barrier does not say so: %s", gang_last_error());
  CHECK_STATUS(gang_shrink(g, 2000, &small), GANG_ERR_ABORTED);
  CHECK(small == NULL, "an excluded rank got a gang");
  CHECK(strstr(gang_last_error(), "excluded") != NULL,
        "the excluded rank's gang_shrink does not say so: %s", gang_last_error());
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_WOKE], 1, __ATOMIC_SEQ_CST);
  return 0;
}

/* Whether `text` names `rank` ("rank 3", "ranks 1, 3", "rank 3 (pid ..."). */
static int names_rank(const char* text, int rank) {
  const char* at = text;
  while ((at = strstr(at, "rank")) != NULL) {
    const char* p = at + 4;
    if (*p == 's') ++p;
    while (*p == ' ') {
      char* end;
      long r = strtol(p, &end, 10);
      if (end == p) break;
      if (r == rank) return 1;
      p = end;
      if (*p == ',') ++p;
    }
    at += 4;
  }
  return 0;
}

/* Blocks in the case's operation until the victims die; its status. */
static gang_status_t block(gang_t* g, int rank, int size, enum where where) {
  static float x[1 << 14], y[1 << 14];
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_READY], 1, __ATOMIC_SEQ_CST);
  switch (where) {
    case IN_ALL_REDUCE:
      return gang_all_reduce(g, x, y, 1 << 14, GANG_FLOAT32, GANG_SUM, NULL);
    case IN_BARRIER:
      /* Rounds of barriers until one fails. */
      for (;;) {
        gang_status_t s = gang_barrier(g, NULL);
        if (s != GANG_OK) return s;
      }
    case IN_P2P: {
      /* Everyone exchanges with the last rank, which is the victim. */
      const int peer = size - 1;
      if (rank == peer) {
        gang_test_sleep_ms(60000);
        return GANG_OK;
      }
      return gang_recv(g, y, 1, GANG_FLOAT32, peer, 7, NULL);
    }
  }
  return GANG_ERR_INTERNAL;
}

static int rank_shrink(gang_t* g, int rank, int size, void* arg) {
  const shrink_case_t* c = (const shrink_case_t*)arg;
  gang_t* small = NULL;
  gang_status_t s;
  int64_t t0;
  int expect_size = survivors(c, size);
  int new_rank = 0;
  char name[256];
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == c->stopped) return wake_excluded(g, size, c);
  if (is_victim(c, rank)) {
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_READY], 1, __ATOMIC_SEQ_CST);
    gang_test_sleep_ms(60000); /* killed long before this ends */
    return 1;
  }
  s = block(g, rank, size, c->where);
  CHECK(s == GANG_ERR_PEER_LOST || s == GANG_ERR_ABORTED || s == GANG_ERR_TIMEOUT,
        "the blocked call returned %s", gang_status_name(s));
  /* Every survivor's error names a rank that was lost (or stopped), even
   * when it noticed only through another survivor. */
  {
    int named = 0;
    for (int i = 0; i < c->nvictims; ++i) named |= names_rank(gang_last_error(), c->victims[i]);
    if (c->stopped != NONE) named |= names_rank(gang_last_error(), c->stopped);
    CHECK(named, "rank %d's error names no lost rank: %s", rank, gang_last_error());
  }
  t0 = gang_test_now_ms();
  if (rank == c->late && c->late_ms > LATE_WAITED_MS) {
    /* Busy through the agreement: comes back after the others' timeout. */
    gang_test_sleep_ms(c->late_ms);
    CHECK_STATUS(gang_shrink(g, 2000, &small), GANG_ERR_ABORTED);
    CHECK(small == NULL, "an excluded rank got a gang");
    CHECK(strstr(gang_last_error(), "excluded") != NULL,
          "the excluded rank's error does not say so: %s", gang_last_error());
    return 0;
  }
  if (c->dies_in_shrink != NONE) {
    /* A short window to meet in, then the survivors agree again. */
    setenv("GANG_SHRINK_FORM_MS", "1500", 1);
  }
  if (rank == c->late) gang_test_sleep_ms(c->late_ms); /* writing a checkpoint */
  if (c->decider_dies_at != NULL) {
    if (rank == c->decider) {
      setenv("GANG_FAULT_POINT", c->decider_dies_at, 1);
      s = gang_shrink(g, 20000, &small);
      fprintf(stderr, "rank %d outlived its death at %s: %s\n", rank, c->decider_dies_at,
              gang_status_name(s));
      return 1;
    }
    /* The decider is the first in; a short window to meet in (a decider
     * that died after committing is in the outcome). */
    gang_test_sleep_ms(300);
    setenv("GANG_SHRINK_FORM_MS", "1500", 1);
  }
  if (rank == c->dies_in_shrink) {
    __atomic_add_fetch(&gang_test_shared_ints()[SLOT_IN_SHRINK], 1, __ATOMIC_SEQ_CST);
    s = gang_shrink(g, 20000, &small);
    fprintf(stderr, "rank %d outlived its kill in gang_shrink: %s\n", rank,
            gang_status_name(s));
    return 1;
  }
  CHECK_OK(gang_shrink(g, c->dies_in_shrink != NONE ? 20000 : SHRINK_TIMEOUT_MS, &small));
  __atomic_add_fetch(&gang_test_shared_ints()[SLOT_SHRUNK], 1, __ATOMIC_SEQ_CST);
  {
    const int64_t took = gang_test_now_ms() - t0;
    volatile int64_t* slot = &gang_test_shared_ints()[SLOT_RECOVER];
    int64_t seen = *slot;
    while (took > seen && !__atomic_compare_exchange_n(slot, &seen, took, 0,
                                                      __ATOMIC_SEQ_CST,
                                                      __ATOMIC_SEQ_CST)) {
    }
  }
  CHECK(small != NULL, "no gang");
  if (c->decider_dies_at != NULL) {
    /* Within the detection interval (3 s) and the window to meet (1.5 s),
     * never the 20 s timeout. */
    const int64_t took = gang_test_now_ms() - t0;
    CHECK(took <= 4500, "with the decider lost at %s, recovery took %lld ms",
          c->decider_dies_at, (long long)took);
  }
  if (c->late != NONE && c->late_ms <= LATE_WAITED_MS && rank != c->late) {
    /* Waited for the late rank, and not much longer. */
    const int64_t took = gang_test_now_ms() - t0;
    CHECK(took >= c->late_ms - 100 && took <= c->late_ms + LATE_SLACK_MS,
          "recovery took %lld ms with a rank %d ms late", (long long)took, c->late_ms);
  }
  CHECK(gang_size(small) == expect_size, "shrunk to %d ranks, want %d",
        gang_size(small), expect_size);
  /* Ranked in the order of the old ranks. */
  for (int r = 0; r < rank; ++r)
    if (!left_out(c, r)) ++new_rank;
  CHECK(gang_rank(small) == new_rank, "new rank %d, want %d", gang_rank(small), new_rank);
  /* The first membership change of "root", however many attempts. */
  snprintf(name, sizeof name, "%s/shrink1", gang_name(g));
  CHECK(strcmp(gang_name(small), name) == 0, "named \"%s\", want \"%s\"",
        gang_name(small), name);
  /* The woken rank has failed its calls on the old gang: the new gang's
   * results must not have noticed. */
  if (c->stopped != NONE && gang_test_wait_shared(SLOT_WOKE, 1, 60000) != 0) {
    fprintf(stderr, "the stopped rank never woke and checked its calls\n");
    return 1;
  }
  /* The survivors' root ranks, summed in the new gang. */
  {
    int64_t mine = gang_root_rank(small, gang_rank(small)), sum = 0, want = 0;
    CHECK(mine == rank, "root rank %lld of new rank %d, want %d", (long long)mine,
          gang_rank(small), rank);
    CHECK_OK(gang_all_reduce(small, &mine, &sum, 1, GANG_INT64, GANG_SUM, NULL));
    for (int r = 0; r < size; ++r)
      if (!left_out(c, r)) want += r;
    CHECK(sum == want, "sum of the survivors' ranks %lld, want %lld", (long long)sum,
          (long long)want);
  }
  CHECK_OK(gang_barrier(small, NULL));
  CHECK_OK(gang_destroy(small));
  return 0;
}

static void run(int size, shrink_case_t c) {
  gang_test_opts_t o;
  gang_test_opts_init(&o);
  o.size = size;
  o.fn = rank_shrink;
  o.arg = &c;
  /* A stopped rank is noticed only at the timeout. */
  o.gang_timeout_ms = c.stopped != NONE ? 2000 : TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  o.parent_fn = parent_kill;
  o.killed_rank = c.nvictims > 0 ? c.victims[0] : NONE;
  o.killed_rank2 = c.nvictims > 1              ? c.victims[1]
                   : c.decider_dies_at != NULL ? c.decider
                                               : c.dies_in_shrink;
  assert_int_equal(gang_test_run(&o), 0);
  fprintf(stderr, "shrink: %d ranks, %d lost%s%s%s%s: the slowest survivor had its new gang "
          "%lld ms after its call failed\n", size, c.nvictims,
          c.late < 0 ? "" : c.late_ms > LATE_WAITED_MS ? ", one late and excluded"
                                                       : ", one late and waited for",
          c.stopped >= 0 ? ", one stopped and excluded" : "",
          c.dies_in_shrink >= 0 ? ", one killed inside gang_shrink"
          : c.decider_dies_at   ? ", the decider killed at "
                                : "",
          c.decider_dies_at ? c.decider_dies_at : "",
          (long long)gang_test_shared_ints()[SLOT_RECOVER]);
}

static void test_lost_in_all_reduce_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{2, -1}, 1, IN_ALL_REDUCE, NONE, 0, NONE, NONE, NULL, NONE});
}
static void test_lost_in_barrier_n3(void** s) {
  (void)s;
  run(3, (shrink_case_t){{0, -1}, 1, IN_BARRIER, NONE, 0, NONE, NONE, NULL, NONE});
}
static void test_lost_in_p2p_n3(void** s) {
  (void)s;
  run(3, (shrink_case_t){{2, -1}, 1, IN_P2P, NONE, 0, NONE, NONE, NULL, NONE});
}
static void test_lost_in_all_reduce_n8(void** s) {
  (void)s;
  run(8, (shrink_case_t){{5, -1}, 1, IN_ALL_REDUCE, NONE, 0, NONE, NONE, NULL, NONE});
}
static void test_late_rank_excluded_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{3, -1}, 1, IN_ALL_REDUCE, 1, 5000, NONE, NONE, NULL, NONE});
}
/* 8 ranks, the last killed, the one before it 1 s late: 7 stay. */
static void test_late_rank_waited_for_n8(void** s) {
  (void)s;
  run(8, (shrink_case_t){{7, -1}, 1, IN_ALL_REDUCE, 6, 1000, NONE, NONE, NULL, NONE});
}
/* 4 ranks, rank 0 (the store's rank) killed, rank 3 1.5 s late: 3 stay. */
static void test_late_rank_waited_for_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{0, -1}, 1, IN_ALL_REDUCE, 3, 1500, NONE, NONE, NULL, NONE});
}

static void test_two_lost_at_once_n6(void** s) {
  (void)s;
  run(6, (shrink_case_t){{1, 4}, 2, IN_ALL_REDUCE, NONE, 0, NONE, NONE, NULL, NONE});
}
static void test_stopped_rank_excluded_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{-1, -1}, 0, IN_ALL_REDUCE, NONE, 0, 2, NONE, NULL, NONE});
}
/* Rank 1 is killed inside gang_shrink while the round waits for rank 2,
 * which is late. */
static void test_lost_in_shrink_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{3, -1}, 1, IN_ALL_REDUCE, 2, 1000, NONE, 1, NULL, NONE});
}

/* The decider dies at each step of the round: waiting (a late rank holds
 * the round open), before its commit, and between its commit and writing
 * the outcome. The others go on within the detection interval (plus, after
 * a commit, the window in which the outcome's members fail to meet). */
static void test_decider_dies_waiting_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{3, -1}, 1, IN_ALL_REDUCE, 2, 1000, NONE, NONE, "shrink.decide", 1});
}
static void test_decider_dies_before_commit_n4(void** s) {
  (void)s;
  run(4, (shrink_case_t){{3, -1}, 1, IN_ALL_REDUCE, NONE, 0, NONE, NONE, "shrink.propose", 0});
}
static void test_decider_dies_after_commit_n5(void** s) {
  (void)s;
  run(5, (shrink_case_t){{1, -1}, 1, IN_ALL_REDUCE, NONE, 0, NONE, NONE, "shrink.commit", 2});
}

/* The store's owner dies: rank 0 served tcp:// itself (no launcher) and
 * exits after rank 3 was lost; ranks 1 and 2's gang_shrink fails within
 * seconds with GANG_ERR_STORE saying the store is gone and how to keep it,
 * rather than retrying the refused connection until the timeout. */
#define SLOT_OWNER_GONE 6
#define STORE_GONE_LIMIT_MS 5000

static int store_owner(int rank, int size, const char* url, void* arg) {
  const int port = *(const int*)arg;
  char init[64];
  gang_options_t o;
  gang_t* g = NULL;
  gang_t* small = NULL;
  int64_t x = 1, y = 0, t0;
  gang_status_t st;
  (void)url;
  snprintf(init, sizeof init, "tcp://127.0.0.1:%d", port);
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.init_method = init;
  o.timeout_ms = 20000;
  CHECK_OK(gang_create(&o, &g));
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 3) kill(getpid(), SIGKILL);
  st = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  CHECK(st != GANG_OK, "the all-reduce without rank 3 succeeded");
  if (rank == 0) {
    __atomic_store_n(&gang_test_shared_ints()[SLOT_OWNER_GONE], 1, __ATOMIC_SEQ_CST);
    _exit(0); /* and the store with it */
  }
  CHECK(gang_test_wait_shared(SLOT_OWNER_GONE, 1, 20000) == 0, "rank 0 never left");
  gang_test_sleep_ms(200);
  t0 = gang_test_now_ms();
  st = gang_shrink(g, 20000, &small);
  CHECK(st == GANG_ERR_STORE, "gang_shrink returned %s: %s", gang_status_name(st),
        gang_last_error());
  CHECK(gang_test_now_ms() - t0 <= STORE_GONE_LIMIT_MS, "it took %lld ms",
        (long long)(gang_test_now_ms() - t0));
  CHECK(strstr(gang_last_error(), "is gone") != NULL &&
            strstr(gang_last_error(), "--store-only") != NULL,
        "the message does not say what happened and what to do: %s", gang_last_error());
  return 0;
}

static void test_store_owner_dies_n4(void** s) {
  gang_test_opts_t o;
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int port, fd = socket(AF_INET, SOCK_STREAM, 0);
  (void)s;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr*)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr*)&a, &len), 0);
  port = ntohs(a.sin_port);
  close(fd);
  gang_test_opts_init(&o);
  o.size = 4;
  o.plain_fn = store_owner;
  o.arg = &port;
  o.wall_timeout_s = WALL_S;
  o.killed_rank = 3;
  assert_int_equal(gang_test_run(&o), 0);
}

/* A minority never goes on alone: rank 3 is killed, rank 0 calls
 * gang_shrink while ranks 1 and 2 (alive) do not: rank 0 fails with
 * GANG_ERR_TIMEOUT saying so, rather than making a gang of itself. Then
 * ranks 1 and 2 shrink, a majority of the living: they go on as two. */
#define SLOT_ZERO_DONE 7

static int rank_minority(gang_t* g, int rank, int size, void* arg) {
  gang_t* small = NULL;
  int64_t x = 1, y = 0;
  gang_status_t st;
  (void)size;
  (void)arg;
  CHECK_OK(gang_barrier(g, NULL));
  if (rank == 3) kill(getpid(), SIGKILL);
  st = gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  CHECK(st != GANG_OK, "the all-reduce without rank 3 succeeded");
  if (rank == 0) {
    st = gang_shrink(g, 3000, &small);
    __atomic_store_n(&gang_test_shared_ints()[SLOT_ZERO_DONE], 1, __ATOMIC_SEQ_CST);
    CHECK(st == GANG_ERR_TIMEOUT && small == NULL, "rank 0 alone: %s (%s)",
          gang_status_name(st), gang_last_error());
    CHECK(strstr(gang_last_error(), "minority") != NULL, "message: %s", gang_last_error());
    gang_test_sleep_ms(6000); /* alive while the others shrink */
    return 0;
  }
  CHECK(gang_test_wait_shared(SLOT_ZERO_DONE, 1, 20000) == 0, "rank 0 never gave up");
  CHECK_OK(gang_shrink(g, 4000, &small));
  CHECK(gang_size(small) == 2, "the majority shrank to %d", gang_size(small));
  CHECK_OK(gang_all_reduce(small, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == 2, "sum %lld", (long long)y);
  CHECK_OK(gang_destroy(small));
  return 0;
}

static void test_minority_alone_n4(void** s) {
  gang_test_opts_t o;
  (void)s;
  gang_test_opts_init(&o);
  o.size = 4;
  o.fn = rank_minority;
  o.gang_timeout_ms = TIMEOUT_MS;
  o.wall_timeout_s = WALL_S;
  o.killed_rank = 3;
  assert_int_equal(gang_test_run(&o), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lost_in_all_reduce_n4),
      cmocka_unit_test(test_lost_in_all_reduce_n8),
      cmocka_unit_test(test_lost_in_barrier_n3),
      cmocka_unit_test(test_lost_in_p2p_n3),
      cmocka_unit_test(test_late_rank_excluded_n4),
      cmocka_unit_test(test_late_rank_waited_for_n8),
      cmocka_unit_test(test_late_rank_waited_for_n4),
      cmocka_unit_test(test_two_lost_at_once_n6),
      cmocka_unit_test(test_stopped_rank_excluded_n4),
      cmocka_unit_test(test_lost_in_shrink_n4),
      cmocka_unit_test(test_decider_dies_waiting_n4),
      cmocka_unit_test(test_decider_dies_before_commit_n4),
      cmocka_unit_test(test_decider_dies_after_commit_n5),
      cmocka_unit_test(test_store_owner_dies_n4),
      cmocka_unit_test(test_minority_alone_n4),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
