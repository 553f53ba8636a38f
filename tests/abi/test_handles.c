/*
 * test_handles.c - handles that are destroyed, stale, foreign, or destroyed
 * while another thread uses them (gang.h "Conventions" and "Handles").
 *
 * A destroyed or stale handle is GANG_ERR_INVALID_ARGUMENT naming the
 * function (queries give their "no handle" value) without any memory being
 * read through it, and it never reaches the object that now holds its slot.
 * gang_destroy while another thread is inside a call with the gang is
 * defined: that call completes or fails (GANG_ERR_ABORTED, or its own
 * timeout), calls starting afterwards are refused, nothing crashes. The CI
 * runs this under AddressSanitizer and ThreadSanitizer, which turn a read of
 * freed memory or a race into a failure.
 *
 * Some checks know how handles are made (src/abi/handles.h): a handle's
 * 4096-byte page is its slot, and the 8-byte word within it the slot's
 * generation.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define SLOT_OF(h) ((uintptr_t)(h) & ~(uintptr_t)4095)

/* Checks a refused call: INVALID_ARGUMENT, and the message names api and
 * says the handle is not live (or NULL). */
#define REFUSED(expr, api)                                                  \
  do {                                                                      \
    gang_status_t refused_s_ = (expr);                                      \
    assert_int_equal(refused_s_, GANG_ERR_INVALID_ARGUMENT);                \
    if (strstr(gang_last_error(), (api)) == NULL ||                         \
        strstr(gang_last_error(), "not a live") == NULL) {                  \
      fail_msg("%s: message \"%s\" does not name %s or say \"not a live\"", \
               #expr, gang_last_error(), (api));                            \
    }                                                                       \
  } while (0)

static gang_t* fake(int rank, int size) {
  gang_t* g = NULL;
  assert_int_equal(gang_create_fake(rank, size, &g), GANG_OK);
  assert_non_null(g);
  return g;
}

/* The gang answers as fake(rank, size) does: queries and an all-reduce.
 * rank -1: any rank. */
static void assert_works(gang_t* g, int rank, int size) {
  int64_t x = 5, y = 0;
  if (rank != -1) assert_int_equal(gang_rank(g), rank);
  assert_true(gang_rank(g) >= 0 && gang_rank(g) < size);
  assert_int_equal(gang_size(g), size);
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), GANG_OK);
  assert_int_equal(y, 5 * size);
}

/* Every kind of gang call on a handle that is not live. */
static void assert_gang_refused(gang_t* g) {
  int64_t x = 1, y = 0;
  double d = 0;
  gang_status_t st = GANG_OK;
  gang_t* sub = NULL;
  gang_work_t* w = NULL;
  const int ranks[1] = {0};
  REFUSED(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL), "gang_all_reduce");
  REFUSED(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w), "gang_all_reduce");
  assert_null(w);
  REFUSED(gang_barrier(g, NULL), "gang_barrier");
  REFUSED(gang_all_sum(g, 1.0, &d), "gang_all_sum");
  REFUSED(gang_abort(g), "gang_abort");
  REFUSED(gang_set_timeout(g, 1000), "gang_set_timeout");
  REFUSED(gang_get_async_error(g, &st), "gang_get_async_error");
  REFUSED(gang_group_start(g), "gang_group_start");
  REFUSED(gang_create_subgang(g, ranks, 1, &sub), "gang_create_subgang");
  assert_null(sub);
  REFUSED(gang_destroy(g), "gang_destroy");
  assert_int_equal(gang_rank(g), -1);
  assert_int_equal(gang_size(g), -1);
  assert_string_equal(gang_backend_name(g), "");
  assert_string_equal(gang_name(g), "");
  assert_int_equal(gang_device_index(g), -1);
  assert_int_equal(gang_get_timeout(g), -1);
  assert_int_equal(gang_root_rank(g, 0), -1);
  assert_int_equal(gang_supports(g, GANG_SUM, GANG_INT64), 0);
}

/* ---- double destroy --------------------------------------------------------------------- */

static void test_double_destroy_gang(void** s) {
  gang_t* g = fake(1, 3);
  (void)s;
  assert_int_equal(gang_destroy(g), GANG_OK);
  REFUSED(gang_destroy(g), "gang_destroy");
  REFUSED(gang_destroy(g), "gang_destroy");
  assert_gang_refused(g);
}

static void test_double_destroy_store(void** s) {
  gang_store_t* st = NULL;
  void* v = NULL;
  size_t n = 0;
  const char* keys[1] = {"k"};
  (void)s;
  assert_int_equal(gang_store_create("memory://test_handles", 0, 1000, &st), GANG_OK);
  assert_int_equal(gang_store_set(st, "k", "v", 1), GANG_OK);
  assert_int_equal(gang_store_destroy(st), GANG_OK);
  REFUSED(gang_store_destroy(st), "gang_store_destroy");
  REFUSED(gang_store_set(st, "k", "v", 1), "gang_store_set");
  REFUSED(gang_store_get(st, "k", &v, &n), "gang_store_get");
  assert_null(v);
  REFUSED(gang_store_add(st, "c", 1, NULL), "gang_store_add");
  REFUSED(gang_store_wait(st, keys, 1), "gang_store_wait");
  REFUSED(gang_store_delete(st, "k"), "gang_store_delete");
  assert_int_equal(gang_store_port(st), -1);
  {
    /* A gang made with a destroyed store is refused too. */
    gang_options_t o;
    gang_t* g = NULL;
    gang_options_init(&o);
    o.backend = "fake";
    o.rank = 0;
    o.size = 1;
    o.store = st;
    REFUSED(gang_create(&o, &g), "gang_create");
    assert_null(g);
  }
}

static void test_double_destroy_work(void** s) {
  gang_t* g = fake(0, 2);
  gang_work_t* w = NULL;
  int64_t x = 3, y = 0;
  (void)s;
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w), GANG_OK);
  assert_int_equal(gang_work_destroy(w), GANG_OK);
  assert_int_equal(y, 6);
  REFUSED(gang_work_destroy(w), "gang_work_destroy");
  REFUSED(gang_work_wait(w, -1), "gang_work_wait");
  REFUSED(gang_work_test(w), "gang_work_test");
  assert_works(g, 0, 2);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

static void test_double_destroy_gangs(void** s) {
  gang_t* g = fake(5, 8);
  gangs_t* gs = NULL;
  gang_t* tp = NULL;
  gang_t* dp = NULL;
  gang_parallel_config_t c;
  (void)s;
  gang_parallel_config_init(&c);
  c.tp = 2;
  assert_int_equal(gangs_split_parallel(g, &c, &gs), GANG_OK);
  assert_ptr_equal(gangs_get(gs, GANG_AXIS_ROOT), g);
  tp = gangs_get(gs, GANG_AXIS_TP);
  dp = gangs_get(gs, GANG_AXIS_DP);
  assert_works(tp, -1, 2);
  assert_works(dp, -1, 4);
  assert_int_equal(gangs_destroy(gs), GANG_OK);
  REFUSED(gangs_destroy(gs), "gangs_destroy");
  assert_null(gangs_get(gs, GANG_AXIS_TP));
  assert_null(gangs_get(gs, GANG_AXIS_ROOT));
  /* The gangs it owned are gone; the root, the caller's, is not. */
  assert_gang_refused(tp);
  assert_gang_refused(dp);
  assert_works(g, 5, 8);
  assert_int_equal(gang_destroy(g), GANG_OK);

  /* The other order: the root destroyed first leaves the others usable. */
  g = fake(5, 8);
  assert_int_equal(gangs_split_parallel(g, &c, &gs), GANG_OK);
  assert_int_equal(gang_destroy(g), GANG_OK);
  assert_gang_refused(gangs_get(gs, GANG_AXIS_ROOT));
  assert_works(gangs_get(gs, GANG_AXIS_TP), -1, 2);
  assert_int_equal(gangs_destroy(gs), GANG_OK);
}

/* ---- stale handles whose slot holds a new object ------------------------------------------ */

/* Creates and destroys gangs until one lands on stale's slot, checking on
 * the way that none gets stale's value; returns that gang (of rank 3, size
 * 4), alive. */
static gang_t* gang_on_slot_of(gang_t* stale) {
  int i;
  for (i = 0; i < 20000; ++i) {
    gang_t* g = fake(3, 4);
    assert_true(g != stale);
    if (SLOT_OF(g) == SLOT_OF(stale)) return g;
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
  fail_msg("no new gang reused the slot of %p in 20000 creations", (void*)stale);
  return NULL;
}

static void test_stale_gang_reused_slot(void** s) {
  gang_t* stale = fake(0, 2);
  gang_t* fresh = NULL;
  (void)s;
  assert_int_equal(gang_destroy(stale), GANG_OK);
  fresh = gang_on_slot_of(stale);
  /* Nothing done with the stale handle reaches the new gang. */
  assert_gang_refused(stale);
  assert_works(fresh, 3, 4);
  assert_int_equal(gang_destroy(fresh), GANG_OK);
  assert_gang_refused(fresh);
}

/* A value is not handed out again soon: not within a long run of creations
 * that each reuse a freed slot. */
static void test_stale_value_not_reused(void** s) {
  gang_t* stale = fake(0, 2);
  int i, on_slot = 0;
  (void)s;
  assert_int_equal(gang_destroy(stale), GANG_OK);
  for (i = 0; i < 30000; ++i) {
    gang_t* g = fake(1, 2);
    assert_true(g != stale);
    on_slot += SLOT_OF(g) == SLOT_OF(stale);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
  assert_true(on_slot > 0); /* the slot itself was reused */
  assert_gang_refused(stale);
}

static void test_stale_work_and_store(void** s) {
  gang_t* g = fake(0, 2);
  gang_work_t* stale = NULL;
  gang_work_t* w = NULL;
  gang_store_t* st = NULL;
  gang_store_t* st2 = NULL;
  int64_t x = 1, y = 0, z = 0;
  int i;
  (void)s;
  assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &stale), GANG_OK);
  assert_int_equal(gang_work_destroy(stale), GANG_OK);
  for (i = 0; i < 20000; ++i) {
    assert_int_equal(gang_all_reduce(g, &x, &z, 1, GANG_INT64, GANG_SUM, &w), GANG_OK);
    assert_true(w != stale);
    if (SLOT_OF(w) == SLOT_OF(stale)) break;
    assert_int_equal(gang_work_destroy(w), GANG_OK);
  }
  assert_int_equal(SLOT_OF(w), SLOT_OF(stale));
  REFUSED(gang_work_destroy(stale), "gang_work_destroy");
  REFUSED(gang_work_wait(stale, 0), "gang_work_wait");
  assert_int_equal(gang_work_wait(w, -1), GANG_OK);
  assert_int_equal(gang_work_destroy(w), GANG_OK);

  assert_int_equal(gang_store_create("memory://stale", 0, 1000, &st), GANG_OK);
  assert_int_equal(gang_store_destroy(st), GANG_OK);
  for (i = 0; i < 20000; ++i) {
    assert_int_equal(gang_store_create("memory://stale", 0, 1000, &st2), GANG_OK);
    assert_true(st2 != st);
    if (SLOT_OF(st2) == SLOT_OF(st)) break;
    assert_int_equal(gang_store_destroy(st2), GANG_OK);
  }
  assert_int_equal(SLOT_OF(st2), SLOT_OF(st));
  REFUSED(gang_store_set(st, "k", "v", 1), "gang_store_set");
  REFUSED(gang_store_destroy(st), "gang_store_destroy");
  assert_int_equal(gang_store_set(st2, "k", "v", 1), GANG_OK);
  assert_int_equal(gang_store_destroy(st2), GANG_OK);
  assert_int_equal(gang_destroy(g), GANG_OK);
}

/* ---- values gang never made ---------------------------------------------------------------- */

static void test_foreign_values(void** s) {
  gang_t* g = fake(2, 3);
  gang_store_t* st = NULL;
  gang_work_t* w = NULL;
  int64_t local = 0;
  int64_t* heap = (int64_t*)calloc(8, sizeof *heap);
  gang_t* bad[8];
  size_t i;
  (void)s;
  assert_non_null(heap);
  assert_int_equal(gang_store_create("memory://foreign", 0, 1000, &st), GANG_OK);
  assert_int_equal(gang_barrier(g, &w), GANG_OK);
  bad[0] = (gang_t*)(uintptr_t)0x1000;
  bad[1] = (gang_t*)&local;
  bad[2] = (gang_t*)heap;
  bad[3] = (gang_t*)~(uintptr_t)7;
  bad[4] = (gang_t*)((char*)g + 1); /* inside g's slot, misaligned */
  bad[5] = (gang_t*)((char*)g + 8); /* g's slot, another generation */
  bad[6] = (gang_t*)st;             /* handles of other kinds */
  bad[7] = (gang_t*)w;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) assert_gang_refused(bad[i]);
  REFUSED(gang_store_set((gang_store_t*)&local, "k", "v", 1), "gang_store_set");
  REFUSED(gang_store_destroy((gang_store_t*)g), "gang_store_destroy");
  REFUSED(gang_work_wait((gang_work_t*)heap, 0), "gang_work_wait");
  REFUSED(gang_work_destroy((gang_work_t*)g), "gang_work_destroy");
  REFUSED(gangs_destroy((gangs_t*)heap), "gangs_destroy");
  REFUSED(gangs_destroy((gangs_t*)g), "gangs_destroy");
  assert_null(gangs_get((gangs_t*)&local, GANG_AXIS_ROOT));
  assert_null(gangs_get((gangs_t*)g, GANG_AXIS_ROOT));
  /* The memory behind the foreign pointers is untouched, and the real
   * handles still work. */
  assert_int_equal(local, 0);
  for (i = 0; i < 8; ++i) assert_int_equal(heap[i], 0);
  assert_works(g, 2, 3);
  assert_int_equal(gang_work_wait(w, -1), GANG_OK);
  assert_int_equal(gang_work_destroy(w), GANG_OK);
  assert_int_equal(gang_store_set(st, "k", "v", 1), GANG_OK);
  assert_int_equal(gang_store_destroy(st), GANG_OK);
  assert_int_equal(gang_destroy(g), GANG_OK);
  free(heap);
}

/* ---- many live handles: several ranges of address space ------------------------------------ */

static int compare_ptr(const void* a, const void* b) {
  const uintptr_t x = (uintptr_t)*(void* const*)a, y = (uintptr_t)*(void* const*)b;
  return x < y ? -1 : x > y;
}

/* More live handles than the first ranges hold: the table reserves more
 * address space as they come (handles.h), and every value stays distinct,
 * names its own object, and is refused once destroyed. */
static void test_many_live_handles(void** s) {
  enum { N = 5000 };
  gang_store_t** st = (gang_store_t**)calloc(N, sizeof *st);
  void** sorted = (void**)calloc(N, sizeof *sorted);
  void* v = NULL;
  size_t n = 0;
  int64_t total = 0;
  int i;
  (void)s;
  assert_non_null(st);
  assert_non_null(sorted);
  for (i = 0; i < N; ++i) {
    char key[32];
    assert_int_equal(gang_store_create("memory://many", 0, 1000, &st[i]), GANG_OK);
    snprintf(key, sizeof key, "k%d", i);
    assert_int_equal(gang_store_set(st[i], key, key, strlen(key)), GANG_OK);
    sorted[i] = st[i];
  }
  qsort(sorted, N, sizeof *sorted, compare_ptr);
  for (i = 1; i < N; ++i) assert_true(sorted[i - 1] != sorted[i]);
  /* Each handle reaches a store; every one of them adds once. */
  for (i = 0; i < N; ++i) {
    assert_int_equal(gang_store_add(st[i], "count", 1, &total), GANG_OK);
  }
  assert_int_equal(total, N);
  assert_int_equal(gang_store_get(st[N - 1], "k0", &v, &n), GANG_OK);
  assert_true(n == 2 && memcmp(v, "k0", 2) == 0);
  gang_free(v);
  /* Another generation of a slot in a later range is not a handle. */
  REFUSED(gang_store_set((gang_store_t*)((char*)st[N - 1] + 8), "k", "v", 1),
          "gang_store_set");
  for (i = 0; i < N; ++i) assert_int_equal(gang_store_destroy(st[i]), GANG_OK);
  for (i = 0; i < N; i += 97) REFUSED(gang_store_set(st[i], "k", "v", 1), "gang_store_set");
  REFUSED(gang_store_destroy(st[N - 1]), "gang_store_destroy");
  free(sorted);
  free(st);
}

/* ---- destroy while other threads use the handle ------------------------------------------- */

#define NUSERS 6

typedef struct user {
  gang_t* g;
  int id;
  int rank, size;
  long calls;           /* calls that succeeded */
  gang_status_t last;   /* the status that ended the loop */
  char message[512];
  char wrong[256];      /* a wrong answer, if any */
} user_t;

/* Uses the gang in every way until a call fails; the failure must be that
 * the handle died (INVALID_ARGUMENT) or the gang was shut down under a
 * running call (ABORTED). */
static void* user_loop(void* p) {
  user_t* u = (user_t*)p;
  long i;
  for (i = u->id;; ++i) {
    gang_status_t s = GANG_OK;
    int64_t x = i, y = 0;
    switch (i % 7) {
      case 0:
        s = gang_all_reduce(u->g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
        if (s == GANG_OK && y != x * u->size) {
          snprintf(u->wrong, sizeof u->wrong, "all_reduce gave %lld", (long long)y);
        }
        break;
      case 1: {
        gang_work_t* w = NULL;
        s = gang_all_reduce(u->g, &x, &y, 1, GANG_INT64, GANG_MAX, &w);
        if (s == GANG_OK) {
          s = gang_work_wait(w, -1);
          if (gang_work_destroy(w) != GANG_OK) {
            snprintf(u->wrong, sizeof u->wrong, "gang_work_destroy failed: %s",
                     gang_last_error());
          }
        }
        break;
      }
      case 2: {
        double d = 0;
        s = gang_all_sum(u->g, 2.0, &d);
        if (s == GANG_OK && d != 2.0 * u->size) {
          snprintf(u->wrong, sizeof u->wrong, "all_sum gave %g", d);
        }
        break;
      }
      case 3: {
        void* out = NULL;
        size_t n = 0;
        /* From this rank: a fake gang's broadcasts move nothing. */
        s = gang_broadcast_bytes(u->g, "hello", 5, u->rank, &out, &n);
        if (s == GANG_OK && (n != 5 || memcmp(out, "hello", 5) != 0)) {
          snprintf(u->wrong, sizeof u->wrong, "broadcast_bytes gave %zu bytes", n);
        }
        gang_free(out);
        break;
      }
      case 4: {
        const int r = gang_rank(u->g);
        const char* name = gang_name(u->g);
        if (r == -1) {
          /* Dead; the next call that can fail says so. */
          s = gang_barrier(u->g, NULL);
          if (s == GANG_OK) snprintf(u->wrong, sizeof u->wrong, "rank -1 but usable");
        } else if (r != u->rank || name == NULL) {
          snprintf(u->wrong, sizeof u->wrong, "gang_rank gave %d", r);
        }
        break;
      }
      case 5:
        s = gang_barrier(u->g, NULL);
        break;
      default: {
        gang_status_t err = GANG_OK;
        s = gang_get_async_error(u->g, &err);
        break;
      }
    }
    if (u->wrong[0] != '\0') return NULL;
    if (s != GANG_OK) {
      u->last = s;
      snprintf(u->message, sizeof u->message, "%s", gang_last_error());
      return NULL;
    }
    ++u->calls;
  }
}

static void test_destroy_while_used_fake(void** s) {
  int round;
  (void)s;
  for (round = 0; round < 40; ++round) {
    pthread_t th[NUSERS];
    user_t users[NUSERS];
    gang_t* g = fake(1, 3);
    int i;
    memset(users, 0, sizeof users);
    for (i = 0; i < NUSERS; ++i) {
      users[i].g = g;
      users[i].id = i;
      users[i].rank = 1;
      users[i].size = 3;
      assert_int_equal(pthread_create(&th[i], NULL, user_loop, &users[i]), 0);
    }
    gang_test_sleep_ms(round % 4 == 0 ? 0 : 2 + round % 10);
    assert_int_equal(gang_destroy(g), GANG_OK);
    for (i = 0; i < NUSERS; ++i) pthread_join(th[i], NULL);
    for (i = 0; i < NUSERS; ++i) {
      if (users[i].wrong[0] != '\0') fail_msg("user %d: %s", i, users[i].wrong);
      if (users[i].last != GANG_ERR_INVALID_ARGUMENT && users[i].last != GANG_ERR_ABORTED) {
        fail_msg("user %d ended with %s: %s", i, gang_status_name(users[i].last),
                 users[i].message);
      }
    }
    assert_gang_refused(g);
  }
}

typedef struct destroyer {
  gang_t* g;
  pthread_barrier_t* start;
  gang_status_t status;
} destroyer_t;

static void* destroy_gang(void* p) {
  destroyer_t* d = (destroyer_t*)p;
  pthread_barrier_wait(d->start);
  d->status = gang_destroy(d->g);
  return NULL;
}

/* Several threads destroy one gang at once: exactly one succeeds. */
static void test_racing_destroys(void** s) {
  int round;
  (void)s;
  for (round = 0; round < 50; ++round) {
    pthread_t th[4];
    destroyer_t d[4];
    pthread_barrier_t start;
    gang_t* g = fake(0, 2);
    int i, ok = 0;
    pthread_barrier_init(&start, NULL, 4);
    for (i = 0; i < 4; ++i) {
      d[i].g = g;
      d[i].start = &start;
      d[i].status = GANG_ERR_INTERNAL;
      assert_int_equal(pthread_create(&th[i], NULL, destroy_gang, &d[i]), 0);
    }
    for (i = 0; i < 4; ++i) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (i = 0; i < 4; ++i) {
      if (d[i].status == GANG_OK) {
        ++ok;
      } else {
        assert_int_equal(d[i].status, GANG_ERR_INVALID_ARGUMENT);
      }
    }
    assert_int_equal(ok, 1);
  }
}

typedef struct store_user {
  gang_store_t* st;
  int id;
  gang_status_t last;
  char wrong[256];
} store_user_t;

static void* store_loop(void* p) {
  store_user_t* u = (store_user_t*)p;
  char key[32];
  long i;
  snprintf(key, sizeof key, "user%d", u->id);
  for (i = 0;; ++i) {
    void* v = NULL;
    size_t n = 0;
    gang_status_t s = gang_store_set(u->st, key, &i, sizeof i);
    if (s == GANG_OK) s = gang_store_get(u->st, key, &v, &n);
    if (s == GANG_OK && (n != sizeof i || memcmp(v, &i, n) != 0)) {
      snprintf(u->wrong, sizeof u->wrong, "get gave %zu bytes", n);
    }
    gang_free(v);
    if (u->wrong[0] != '\0') return NULL;
    if (s != GANG_OK) {
      u->last = s;
      return NULL;
    }
  }
}

typedef struct work_user {
  gang_work_t* w;
  gang_status_t last;
} work_user_t;

static void* work_loop(void* p) {
  work_user_t* u = (work_user_t*)p;
  gang_status_t s;
  do {
    s = gang_work_test(u->w);
    if (s == GANG_OK || s == GANG_IN_PROGRESS) s = gang_work_wait(u->w, 0);
  } while (s == GANG_OK || s == GANG_IN_PROGRESS);
  u->last = s;
  return NULL;
}

static void test_destroy_while_used_store_and_work(void** s) {
  int round;
  (void)s;
  for (round = 0; round < 20; ++round) {
    pthread_t th[4];
    store_user_t su[4];
    work_user_t wu[4];
    gang_store_t* st = NULL;
    gang_t* g = fake(0, 2);
    gang_work_t* w = NULL;
    int64_t x = 1, y = 0;
    int i;
    memset(su, 0, sizeof su);
    assert_int_equal(gang_store_create("memory://concurrent", 0, 1000, &st), GANG_OK);
    for (i = 0; i < 4; ++i) {
      su[i].st = st;
      su[i].id = i;
      assert_int_equal(pthread_create(&th[i], NULL, store_loop, &su[i]), 0);
    }
    gang_test_sleep_ms(round % 5);
    assert_int_equal(gang_store_destroy(st), GANG_OK);
    for (i = 0; i < 4; ++i) pthread_join(th[i], NULL);
    for (i = 0; i < 4; ++i) {
      if (su[i].wrong[0] != '\0') fail_msg("store user %d: %s", i, su[i].wrong);
      assert_int_equal(su[i].last, GANG_ERR_INVALID_ARGUMENT);
    }

    assert_int_equal(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, &w), GANG_OK);
    for (i = 0; i < 4; ++i) {
      wu[i].w = w;
      wu[i].last = GANG_OK;
      assert_int_equal(pthread_create(&th[i], NULL, work_loop, &wu[i]), 0);
    }
    gang_test_sleep_ms(round % 5);
    assert_int_equal(gang_work_destroy(w), GANG_OK);
    for (i = 0; i < 4; ++i) pthread_join(th[i], NULL);
    for (i = 0; i < 4; ++i) assert_int_equal(wu[i].last, GANG_ERR_INVALID_ARGUMENT);
    assert_int_equal(y, 2);
    assert_int_equal(gang_destroy(g), GANG_OK);
  }
}

/* ---- destroy while another thread is blocked in a 2-rank all-reduce ------------------------ */

#define BLOCKED_TIMEOUT_MS 3000

/* Shared ints between the ranks. */
enum { SH_DESTROYING = 0, SH_DONE = 1 };

typedef struct blocked {
  gang_t* g;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int started;
  gang_status_t status;
  int64_t result;
  char message[512];
} blocked_t;

static void* blocked_all_reduce(void* p) {
  blocked_t* b = (blocked_t*)p;
  int64_t x = 20, y = 0;
  pthread_mutex_lock(&b->mu);
  b->started = 1;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
  b->status = gang_all_reduce(b->g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL);
  b->result = y;
  snprintf(b->message, sizeof b->message, "%s", gang_last_error());
  return NULL;
}

/* arg: nonzero if rank 1 joins the all-reduce (late, while rank 0 is in
 * gang_destroy), zero if it never does. */
static int rank_destroy_while_blocked(int rank, int size, const char* url, void* arg) {
  const int joins = *(const int*)arg;
  gang_store_t* store = NULL;
  gang_t* g = NULL;
  gang_options_t o;
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = BLOCKED_TIMEOUT_MS;
  CHECK_OK(gang_create(&o, &g));
  if (rank == 0) {
    pthread_t th;
    blocked_t b;
    int64_t t0, took, x = 1, y = 0;
    memset(&b, 0, sizeof b);
    b.g = g;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    CHECK(pthread_create(&th, NULL, blocked_all_reduce, &b) == 0, "pthread_create");
    pthread_mutex_lock(&b.mu);
    while (!b.started) pthread_cond_wait(&b.cv, &b.mu);
    pthread_mutex_unlock(&b.mu);
    gang_test_sleep_ms(300); /* well inside the all-reduce by now */
    __atomic_store_n(&gang_test_shared_ints()[SH_DESTROYING], 1, __ATOMIC_SEQ_CST);
    t0 = gang_test_now_ms();
    CHECK_OK(gang_destroy(g));
    took = gang_test_now_ms() - t0;
    pthread_join(th, NULL);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    printf("rank 1 %s: gang_destroy took %lld ms; the blocked all-reduce returned %s\n",
           joins ? "joins late" : "never joins", (long long)took,
           gang_status_name(b.status));
    /* A call another thread is blocked in is aborted at once, whether or
     * not its peer would have come: destroying never waits for it. */
    CHECK(b.status == GANG_ERR_ABORTED, "the blocked all-reduce returned %s: %s",
          gang_status_name(b.status), b.message);
    CHECK(strstr(b.message, "destroyed") != NULL, "message: %s", b.message);
    CHECK(took < 1000, "gang_destroy took %lld ms", (long long)took);
    CHECK_STATUS(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL),
                 GANG_ERR_INVALID_ARGUMENT);
    CHECK(strstr(gang_last_error(), "gang_all_reduce") != NULL, "message: %s",
          gang_last_error());
    CHECK(gang_rank(g) == -1, "gang_rank of a destroyed gang");
    CHECK_STATUS(gang_destroy(g), GANG_ERR_INVALID_ARGUMENT);
    __atomic_store_n(&gang_test_shared_ints()[SH_DONE], 1, __ATOMIC_SEQ_CST);
  } else {
    if (joins) {
      int64_t x = 1, y = 0;
      CHECK(gang_test_wait_shared(SH_DESTROYING, 1, 20000) == 0, "rank 0 never destroyed");
      gang_test_sleep_ms(500);
      /* Its peer is gone: an error, never a hang or a result. */
      CHECK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL) != GANG_OK,
            "the all-reduce with a destroyed peer succeeded");
    }
    CHECK(gang_test_wait_shared(SH_DONE, 1, 30000) == 0, "rank 0 never finished");
    CHECK_OK(gang_destroy(g)); /* destroying always works */
  }
  CHECK_OK(gang_store_destroy(store));
  return 0;
}

static void test_destroy_while_blocked_gloo(void** s) {
  int joins;
  (void)s;
  for (joins = 1; joins >= 0; --joins) {
    gang_test_opts_t o;
    gang_test_opts_init(&o);
    o.size = 2;
    o.plain_fn = rank_destroy_while_blocked;
    o.arg = &joins;
    o.wall_timeout_s = 60;
    assert_int_equal(gang_test_run(&o), 0);
  }
}

int main(int argc, char** argv) {
  /* The multi-process test first, while this process has no threads. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroy_while_blocked_gloo),
      cmocka_unit_test(test_double_destroy_gang),
      cmocka_unit_test(test_double_destroy_store),
      cmocka_unit_test(test_double_destroy_work),
      cmocka_unit_test(test_double_destroy_gangs),
      cmocka_unit_test(test_stale_gang_reused_slot),
      cmocka_unit_test(test_stale_value_not_reused),
      cmocka_unit_test(test_stale_work_and_store),
      cmocka_unit_test(test_foreign_values),
      cmocka_unit_test(test_many_live_handles),
      cmocka_unit_test(test_destroy_while_used_fake),
      cmocka_unit_test(test_racing_destroys),
      cmocka_unit_test(test_destroy_while_used_store_and_work),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
