/*
 * test_callback_store.c - gang_store_create_callbacks: a store whose
 * operations are the caller's.
 *
 * calls: every gang_store_* call reaches its callback with the key, the
 *   value and the timeout; a callback's error comes back with its status
 *   and message, naming the call and the key; wait works with the caller's
 *   wait, with check alone, and with get alone; release runs once, when the
 *   store is destroyed.
 * bad_input: NULL callbacks or out, a struct_size too small, and each
 *   required callback missing are GANG_ERR_INVALID_ARGUMENT naming it.
 * odd_statuses: callbacks answering GANG_IN_PROGRESS, a peer's status or a
 *   number with no name come back as GANG_ERR_STORE with their text.
 * destroyed_inside: a callback that destroys its own store; the release
 *   runs once, after the callback, never inside it.
 * rendezvous: 3 ranks make their gang through callback stores that forward
 *   to the job's store under a prefix of their own (as a store another
 *   library hands over would), then all-reduce and split; release runs once
 *   the last gang made with the store is destroyed.
 */
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

/* The caller's store: forwards to a gang store under a prefix, counting
 * what it was asked. */
struct mine {
  gang_store_t* inner;
  char prefix[32];
  int sets, gets, adds, removes, checks, waits, releases;
  int64_t last_timeout_ms;
  int fail_next; /* the next call returns GANG_ERR_STORE */
};

static void prefixed(struct mine* m, const char* key, char* out, size_t n) {
  snprintf(out, n, "%s%s", m->prefix, key);
}

static int failing(struct mine* m, char* err, size_t len) {
  if (!m->fail_next) return 0;
  m->fail_next = 0;
  snprintf(err, len, "the caller's store is down");
  return 1;
}

static gang_status_t my_set(void* ctx, const char* key, const void* v, size_t n, char* err,
                            size_t len) {
  struct mine* m = ctx;
  char k[512];
  __sync_fetch_and_add(&m->sets, 1);
  if (failing(m, err, len)) return GANG_ERR_STORE;
  prefixed(m, key, k, sizeof k);
  return gang_store_set(m->inner, k, v, n);
}

static gang_status_t my_get(void* ctx, const char* key, int64_t timeout_ms, void** v, size_t* n,
                            char* err, size_t len) {
  struct mine* m = ctx;
  char k[512];
  void* got = NULL;
  gang_status_t st;
  __sync_fetch_and_add(&m->gets, 1);
  m->last_timeout_ms = timeout_ms;
  if (failing(m, err, len)) return GANG_ERR_STORE;
  prefixed(m, key, k, sizeof k);
  st = gang_store_get(m->inner, k, &got, n);
  if (st != GANG_OK) {
    snprintf(err, len, "%s", gang_last_error());
    return st;
  }
  *v = malloc(*n ? *n : 1);
  if (*n) memcpy(*v, got, *n);
  gang_free(got);
  return GANG_OK;
}

static gang_status_t my_add(void* ctx, const char* key, int64_t d, int64_t* out, char* err,
                            size_t len) {
  struct mine* m = ctx;
  char k[512];
  __sync_fetch_and_add(&m->adds, 1);
  if (failing(m, err, len)) return GANG_ERR_STORE;
  prefixed(m, key, k, sizeof k);
  return gang_store_add(m->inner, k, d, out);
}

static gang_status_t my_remove(void* ctx, const char* key, char* err, size_t len) {
  struct mine* m = ctx;
  char k[512];
  __sync_fetch_and_add(&m->removes, 1);
  if (failing(m, err, len)) return GANG_ERR_STORE;
  prefixed(m, key, k, sizeof k);
  return gang_store_delete(m->inner, k);
}

/* check: whether each key exists now. A get of the inner store would wait,
 * so every key this test checks has a counter beside it ("<key>#"), which an
 * add of 0 reads without waiting. */
static gang_status_t my_check(void* ctx, const char* const* keys, size_t nkeys, int* exist,
                              char* err, size_t len) {
  struct mine* m = ctx;
  size_t i;
  (void)err;
  (void)len;
  __sync_fetch_and_add(&m->checks, 1);
  *exist = 1;
  for (i = 0; i < nkeys; ++i) {
    char k[512];
    int64_t marks = 0;
    snprintf(k, sizeof k, "%s%s#", m->prefix, keys[i]);
    if (gang_store_add(m->inner, k, 0, &marks) != GANG_OK || marks == 0) *exist = 0;
  }
  return GANG_OK;
}

static gang_status_t my_wait(void* ctx, const char* const* keys, size_t nkeys, int64_t timeout_ms,
                             char* err, size_t len) {
  struct mine* m = ctx;
  char k[64][512];
  const char* list[64];
  size_t i;
  __sync_fetch_and_add(&m->waits, 1);
  m->last_timeout_ms = timeout_ms;
  if (nkeys > 64) return GANG_ERR_INVALID_ARGUMENT;
  for (i = 0; i < nkeys; ++i) {
    prefixed(m, keys[i], k[i], sizeof k[i]);
    list[i] = k[i];
  }
  if (gang_store_wait(m->inner, list, nkeys) != GANG_OK) {
    snprintf(err, len, "%s", gang_last_error());
    return GANG_ERR_TIMEOUT;
  }
  return GANG_OK;
}

static void my_release(void* ctx) { __sync_fetch_and_add(&((struct mine*)ctx)->releases, 1); }

static gang_store_callbacks_t callbacks_of(struct mine* m) {
  gang_store_callbacks_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.ctx = m;
  c.set = my_set;
  c.get = my_get;
  c.add = my_add;
  c.remove = my_remove;
  c.release = my_release;
  return c;
}

static void test_calls(void** state) {
  struct mine m;
  gang_store_callbacks_t c;
  gang_store_t* s = NULL;
  void* v = NULL;
  size_t n = 0;
  int64_t sum = 0;
  const char* keys[2] = {"a", "b"};
  (void)state;
  memset(&m, 0, sizeof m);
  assert_int_equal(gang_store_create("memory://callback-calls", 0, 2000, &m.inner), GANG_OK);
  snprintf(m.prefix, sizeof m.prefix, "pre/");
  c = callbacks_of(&m);
  assert_int_equal(gang_store_create_callbacks(&c, 1500, &s), GANG_OK);
  assert_non_null(s);

  assert_int_equal(gang_store_set(s, "a", "hello", 5), GANG_OK);
  assert_int_equal(m.sets, 1);
  /* Through the prefix, into the inner store. */
  assert_int_equal(gang_store_get(m.inner, "pre/a", &v, &n), GANG_OK);
  assert_int_equal(n, 5);
  assert_memory_equal(v, "hello", 5);
  gang_free(v);
  v = NULL;
  assert_int_equal(gang_store_get(s, "a", &v, &n), GANG_OK);
  assert_int_equal(n, 5);
  assert_memory_equal(v, "hello", 5);
  assert_int_equal(m.last_timeout_ms, 1500);
  gang_free(v);
  assert_int_equal(gang_store_add(s, "count", 3, &sum), GANG_OK);
  assert_int_equal(gang_store_add(s, "count", 4, &sum), GANG_OK);
  assert_int_equal(sum, 7);
  assert_int_equal(m.adds, 2);

  /* wait without wait or check: a get per key. */
  assert_int_equal(gang_store_set(s, "b", "", 0), GANG_OK);
  m.gets = 0;
  assert_int_equal(gang_store_wait(s, keys, 2), GANG_OK);
  assert_int_equal(m.gets, 2);
  assert_int_equal(gang_store_delete(s, "a"), GANG_OK);
  assert_int_equal(m.removes, 1);

  /* A callback's error: its status and message, the call and the key. */
  m.fail_next = 1;
  assert_int_equal(gang_store_set(s, "c", "x", 1), GANG_ERR_STORE);
  assert_non_null(strstr(gang_last_error(), "the caller's store is down"));
  assert_non_null(strstr(gang_last_error(), "set \"c\""));
  /* A key that never comes: the timeout, as the inner store says it. */
  assert_int_equal(gang_store_get(s, "never", &v, &n), GANG_ERR_TIMEOUT);

  assert_int_equal(m.releases, 0);
  assert_int_equal(gang_store_destroy(s), GANG_OK);
  assert_int_equal(m.releases, 1);
  gang_store_destroy(m.inner);
}

static void test_wait_paths(void** state) {
  struct mine m;
  gang_store_callbacks_t c;
  gang_store_t* s = NULL;
  const char* keys[2] = {"x", "y"};
  int64_t one = 0;
  (void)state;
  memset(&m, 0, sizeof m);
  assert_int_equal(gang_store_create("memory://callback-waits", 0, 500, &m.inner), GANG_OK);
  snprintf(m.prefix, sizeof m.prefix, "w/");
  /* The caller's wait. */
  c = callbacks_of(&m);
  c.wait = my_wait;
  assert_int_equal(gang_store_create_callbacks(&c, 500, &s), GANG_OK);
  assert_int_equal(gang_store_set(s, "x", "1", 1), GANG_OK);
  assert_int_equal(gang_store_set(s, "y", "2", 1), GANG_OK);
  assert_int_equal(gang_store_wait(s, keys, 2), GANG_OK);
  assert_int_equal(m.waits, 1);
  assert_int_equal(m.last_timeout_ms, 500);
  gang_store_destroy(s);
  /* check alone: polled until every key exists, or the timeout. */
  c = callbacks_of(&m);
  c.check = my_check;
  assert_int_equal(gang_store_create_callbacks(&c, 300, &s), GANG_OK);
  assert_int_equal(gang_store_wait(s, keys, 2), GANG_ERR_TIMEOUT);
  assert_true(m.checks > 1);
  assert_non_null(strstr(gang_last_error(), "did not all appear"));
  assert_int_equal(gang_store_add(m.inner, "w/x#", 1, &one), GANG_OK);
  assert_int_equal(gang_store_add(m.inner, "w/y#", 1, &one), GANG_OK);
  assert_int_equal(gang_store_wait(s, keys, 2), GANG_OK);
  gang_store_destroy(s);
  assert_int_equal(m.releases, 2);
  gang_store_destroy(m.inner);
}

static void test_bad_input(void** state) {
  struct mine m;
  gang_store_callbacks_t c;
  gang_store_t* s = NULL;
  (void)state;
  memset(&m, 0, sizeof m);
  c = callbacks_of(&m);
  assert_int_equal(gang_store_create_callbacks(NULL, 0, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "callbacks"));
  assert_int_equal(gang_store_create_callbacks(&c, 0, NULL), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "out"));
  c.struct_size = 8;
  assert_int_equal(gang_store_create_callbacks(&c, 0, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "struct_size"));
  c = callbacks_of(&m);
  c.get = NULL;
  assert_int_equal(gang_store_create_callbacks(&c, 0, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "callbacks->get"));
  c = callbacks_of(&m);
  c.remove = NULL;
  assert_int_equal(gang_store_create_callbacks(&c, 0, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "callbacks->remove"));
  assert_null(s);
  assert_int_equal(m.releases, 0);
}

/* ---- a gang made through callbacks ----------------------------------------- */

static int rendezvous(int rank, int size, const char* url, void* arg) {
  struct mine m;
  gang_store_callbacks_t c;
  gang_store_t* s = NULL;
  gang_options_t o;
  gang_t *g = NULL, *half = NULL;
  int64_t x = rank + 1, sum = 0;
  (void)arg;
  memset(&m, 0, sizeof m);
  CHECK_OK(gang_store_create(url, 0, 30000, &m.inner));
  snprintf(m.prefix, sizeof m.prefix, "theirs/");
  c = callbacks_of(&m);
  CHECK_OK(gang_store_create_callbacks(&c, 30000, &s));
  gang_options_init(&o);
  o.rank = rank;
  o.size = size;
  o.store = s;
  o.backend = "gloo";
  CHECK_OK(gang_create(&o, &g));
  /* The store may go: the gang holds it. */
  CHECK_OK(gang_store_destroy(s));
  CHECK(m.releases == 0, "released while a gang uses it");
  CHECK(m.sets + m.gets + m.adds > 0, "the rendezvous did not go through the callbacks");
  CHECK_OK(gang_all_reduce(g, &x, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(sum == size * (size + 1) / 2, "sum %lld", (long long)sum);
  CHECK_OK(gang_split(g, rank % 2, rank, &half));
  CHECK(half != NULL, "split");
  CHECK_OK(gang_destroy(half));
  CHECK_OK(gang_destroy(g));
  CHECK(m.releases == 1, "release ran %d times after the last gang went", m.releases);
  gang_store_destroy(m.inner);
  return 0;
}

/* ---- odd callbacks ---------------------------------------------------- */

/* A store whose callbacks answer what a store never does: GANG_IN_PROGRESS,
 * a peer's status, a number with no name. Each call comes back as
 * GANG_ERR_STORE with the callback's text. */
static gang_status_t odd_set(void* ctx, const char* key, const void* v, size_t n, char* err,
                             size_t len) {
  (void)ctx;
  (void)key;
  (void)v;
  (void)n;
  snprintf(err, len, "still busy");
  return GANG_IN_PROGRESS;
}

static gang_status_t odd_get(void* ctx, const char* key, int64_t timeout_ms, void** v, size_t* n,
                             char* err, size_t len) {
  (void)ctx;
  (void)key;
  (void)timeout_ms;
  (void)v;
  (void)n;
  snprintf(err, len, "made up");
  return (gang_status_t)42;
}

static gang_status_t odd_add(void* ctx, const char* key, int64_t d, int64_t* out, char* err,
                             size_t len) {
  (void)ctx;
  (void)key;
  (void)d;
  (void)out;
  snprintf(err, len, "a peer went away");
  return GANG_ERR_PEER_LOST;
}

static gang_status_t odd_remove(void* ctx, const char* key, char* err, size_t len) {
  (void)ctx;
  (void)key;
  (void)err;
  (void)len;
  return GANG_OK;
}

static void test_odd_statuses(void** state) {
  gang_store_callbacks_t c;
  gang_store_t* st = NULL;
  void* v = NULL;
  size_t n = 0;
  int64_t sum = 0;
  (void)state;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.set = odd_set;
  c.get = odd_get;
  c.add = odd_add;
  c.remove = odd_remove;
  assert_int_equal(gang_store_create_callbacks(&c, 1000, &st), GANG_OK);
  assert_int_equal(gang_store_set(st, "k", "v", 1), GANG_ERR_STORE);
  assert_non_null(strstr(gang_last_error(), "GANG_IN_PROGRESS"));
  assert_non_null(strstr(gang_last_error(), "still busy"));
  assert_int_equal(gang_store_get(st, "k", &v, &n), GANG_ERR_STORE);
  assert_non_null(strstr(gang_last_error(), "status 42"));
  assert_non_null(strstr(gang_last_error(), "made up"));
  assert_int_equal(gang_store_add(st, "k", 1, &sum), GANG_ERR_STORE);
  assert_non_null(strstr(gang_last_error(), "a peer went away"));
  assert_int_equal(gang_store_destroy(st), GANG_OK);
}

/* A callback that destroys its own store: the release waits for the
 * operation to end, and runs once. */
struct selfish {
  gang_store_t* self;
  int releases;
  int releases_seen_inside; /* after its destroy, inside the callback */
  gang_status_t destroyed;
};

static gang_status_t selfish_set(void* ctx, const char* key, const void* v, size_t n, char* err,
                                 size_t len) {
  struct selfish* m = ctx;
  (void)key;
  (void)v;
  (void)n;
  (void)err;
  (void)len;
  m->destroyed = gang_store_destroy(m->self);
  m->releases_seen_inside = m->releases;
  return GANG_OK;
}

static void selfish_release(void* ctx) { ((struct selfish*)ctx)->releases += 1; }

static void test_destroyed_inside(void** state) {
  struct selfish m;
  gang_store_callbacks_t c;
  (void)state;
  memset(&m, 0, sizeof m);
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.ctx = &m;
  c.set = selfish_set;
  c.get = odd_get;
  c.add = odd_add;
  c.remove = odd_remove;
  c.release = selfish_release;
  assert_int_equal(gang_store_create_callbacks(&c, 1000, &m.self), GANG_OK);
  assert_int_equal(gang_store_set(m.self, "k", "v", 1), GANG_OK);
  assert_int_equal(m.destroyed, GANG_OK);
  assert_int_equal(m.releases_seen_inside, 0);
  assert_int_equal(m.releases, 1);
}

static void test_rendezvous(void** state) {
  (void)state;
  assert_int_equal(gang_test_run_procs(3, rendezvous, NULL, 120), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls),
      cmocka_unit_test(test_wait_paths),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_rendezvous),
      cmocka_unit_test(test_odd_statuses),
      cmocka_unit_test(test_destroyed_inside),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
