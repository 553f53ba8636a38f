/*
 * torchrun_rank.c - the gang side of test_torchrun.py (not a test by
 * itself).
 *
 *   torchrun_rank gang          inside a torchrun worker: detect the
 *                               environment, create a gang from it (a client
 *                               of the agent's TCPStore) and all-reduce
 *   torchrun_rank store URL     exercise a torch:// store against a
 *                               TCPStore the Python side serves and seeded
 *
 * Exits 0 on success; otherwise prints why (with gang_last_error) to stderr
 * and exits 1.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gang/gang.h>

#include "harness.h"

static int run_gang(void) {
  gang_env_t e;
  gang_options_t o;
  gang_t* g = NULL;
  int64_t v;
  const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  gang_env_init(&e);
  CHECK_OK(gang_env_detect(&e));
  CHECK(strcmp(e.source, "torchrun") == 0, "source is %s", e.source);
  CHECK(agent != NULL && strcmp(agent, "True") == 0,
        "TORCHELASTIC_USE_AGENT_STORE is %s", agent ? agent : "unset");
  gang_options_init(&o);
  CHECK_OK(gang_create(&o, &g));
  CHECK(gang_rank(g) == e.rank && gang_size(g) == e.size,
        "gang rank %d of %d, environment %d of %d", gang_rank(g), gang_size(g),
        e.rank, e.size);
  v = 10 * (gang_rank(g) + 1);
  CHECK_OK(gang_all_reduce(g, &v, &v, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(v == 10 * e.size * (e.size + 1) / 2, "sum %lld", (long long)v);
  printf("gang rank %d of %d: sum %lld (local rank %d of %d, master %s:%d)\n",
         e.rank, e.size, (long long)v, e.local_rank, e.local_size,
         e.master_addr, e.master_port);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static int expect_value(gang_store_t* s, const char* key, const void* want,
                        size_t n) {
  void* v = NULL;
  size_t got = 0;
  CHECK_OK(gang_store_get(s, key, &v, &got));
  CHECK(got == n && (n == 0 || memcmp(v, want, n) == 0),
        "key %s: %zu bytes, expected %zu", key, got, n);
  gang_free(v);
  return 0;
}

/* The Python side set "gang/from_torch" = "hi" and added 5 to
 * "gang/counter" before, and checks "gang/to_torch" and "gang/counter"
 * after. */
static int run_store(const char* url) {
  gang_store_t* s = NULL;
  gang_store_t* quick = NULL;
  int64_t sum = 0;
  void* v = NULL;
  size_t n = 0;
  const size_t big_n = 2u << 20;
  unsigned char* big = malloc(big_n);
  size_t i;
  CHECK_OK(gang_store_create(url, 0, 20000, &s));
  CHECK(expect_value(s, "from_torch", "hi", 2) == 0, "from_torch");
  CHECK_OK(gang_store_add(s, "counter", 2, &sum));
  CHECK(sum == 7, "counter %lld", (long long)sum);
  CHECK_OK(gang_store_set(s, "to_torch", "pong", 4));
  CHECK_OK(gang_store_set(s, "empty", NULL, 0));
  CHECK(expect_value(s, "empty", "", 0) == 0, "empty");
  CHECK(big != NULL, "malloc");
  for (i = 0; i < big_n; ++i) big[i] = (unsigned char)(i * 7 + 3);
  CHECK_OK(gang_store_set(s, "big", big, big_n));
  CHECK(expect_value(s, "big", big, big_n) == 0, "big");
  free(big);
  {
    const char* keys[] = {"from_torch", "to_torch", "counter"};
    CHECK_OK(gang_store_wait(s, keys, 3));
  }
  CHECK_OK(gang_store_set(s, "tmp", "x", 1));
  CHECK_OK(gang_store_delete(s, "tmp"));
  CHECK_OK(gang_store_delete(s, "tmp")); /* missing: not an error */
  CHECK_STATUS(gang_store_add(s, "to_torch", 1, NULL), GANG_ERR_STORE);

  /* A get that times out drops its connection; the store goes on. */
  CHECK_OK(gang_store_create(url, 0, 300, &quick));
  CHECK_STATUS(gang_store_get(quick, "missing", &v, &n), GANG_ERR_TIMEOUT);
  CHECK(strstr(gang_last_error(), "missing") != NULL, "message %s",
        gang_last_error());
  CHECK_OK(gang_store_set(quick, "after_timeout", "ok", 2));
  CHECK(expect_value(s, "after_timeout", "ok", 2) == 0, "after_timeout");
  CHECK_OK(gang_store_destroy(quick));
  CHECK_OK(gang_store_destroy(s));
  printf("torch store %s: ok\n", url);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "gang") == 0) return run_gang();
  if (argc == 3 && strcmp(argv[1], "store") == 0) return run_store(argv[2]);
  fprintf(stderr, "usage: %s gang | store URL\n", argv[0]);
  return 2;
}
