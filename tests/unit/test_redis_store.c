/*
 * test_redis_store.c - "redis://host:port[/prefix]" stores (gang.h "Stores",
 * gang_store_create) against a real redis-server the test starts on a
 * free loopback port: the store calls, waiting and timeouts, key prefixes,
 * a server that is not Redis, and a 3-rank gang that rendezvouses through
 * Redis.
 *
 * Skipped (77) when redis-server is not installed (Debian: redis-server).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

static pid_t g_redis = -1;
static int g_port = 0;
static char g_url[64];

static const char* find_redis(void) {
  static const char* const paths[] = {"/usr/bin/redis-server",
                                      "/usr/local/bin/redis-server",
                                      "/usr/sbin/redis-server"};
  size_t i;
  for (i = 0; i < sizeof paths / sizeof paths[0]; ++i) {
    if (access(paths[i], X_OK) == 0) return paths[i];
  }
  return NULL;
}

static int free_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int port;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr*)&a, sizeof a) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    perror("free_port");
    exit(1);
  }
  port = ntohs(a.sin_port);
  close(fd);
  return port;
}

/* Starts redis-server with nothing persisted, on loopback only. */
static void start_redis(const char* path) {
  char port[16];
  g_port = free_port();
  snprintf(port, sizeof port, "%d", g_port);
  snprintf(g_url, sizeof g_url, "redis://127.0.0.1:%d", g_port);
  g_redis = fork();
  if (g_redis < 0) {
    perror("fork");
    exit(1);
  }
  if (g_redis == 0) {
    const int null = open("/dev/null", O_RDWR);
    /* Goes with the test, however the test ends. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    dup2(null, STDOUT_FILENO);
    execl(path, path, "--port", port, "--bind", "127.0.0.1", "--save", "",
          "--appendonly", "no", "--daemonize", "no", "--dir", "/tmp",
          (char*)NULL);
    perror("exec redis-server");
    _exit(127);
  }
}

static void stop_redis(void) {
  if (g_redis > 0) {
    kill(g_redis, SIGTERM);
    waitpid(g_redis, NULL, 0);
    g_redis = -1;
  }
}

/* Opens a client on g_url plus suffix. The first open also waits for the
 * server to come up: the store retries its connection until the timeout. */
static gang_store_t* open_store(const char* suffix, int64_t timeout_ms) {
  char url[128];
  gang_store_t* s = NULL;
  gang_status_t st;
  snprintf(url, sizeof url, "%s%s", g_url, suffix);
  st = gang_store_create(url, 0, timeout_ms, &s);
  if (st != GANG_OK)
    fail_msg("gang_store_create(%s): %s", url, gang_last_error());
  return s;
}

static void expect_stored(gang_store_t* s, const char* key, const void* want,
                          size_t n) {
  void* v = NULL;
  size_t got = 0;
  assert_int_equal(gang_store_get(s, key, &v, &got), GANG_OK);
  assert_int_equal(got, n);
  if (n > 0) assert_memory_equal(v, want, n);
  gang_free(v);
}

static void test_calls(void** state) {
  gang_store_t* s = open_store("/calls/", 10000);
  static const unsigned char binary[] = {0, 1, '\r', '\n', '$', 0xff, 0};
  const size_t big_n = 3u << 20;
  unsigned char* big = malloc(big_n);
  int64_t sum = 0;
  size_t i;
  (void)state;
  assert_int_equal(gang_store_port(s), g_port);

  assert_int_equal(gang_store_set(s, "k", "hello", 5), GANG_OK);
  expect_stored(s, "k", "hello", 5);
  assert_int_equal(gang_store_set(s, "k", "bye", 3), GANG_OK);
  expect_stored(s, "k", "bye", 3);
  assert_int_equal(gang_store_set(s, "empty", NULL, 0), GANG_OK);
  expect_stored(s, "empty", "", 0);
  assert_int_equal(gang_store_set(s, "bin\r\nkey", binary, sizeof binary),
                   GANG_OK);
  expect_stored(s, "bin\r\nkey", binary, sizeof binary);

  assert_non_null(big);
  for (i = 0; i < big_n; ++i) big[i] = (unsigned char)(i * 131 + 7);
  assert_int_equal(gang_store_set(s, "big", big, big_n), GANG_OK);
  expect_stored(s, "big", big, big_n);
  free(big);

  /* add: a missing key counts as 0, the value reads back as decimal text. */
  assert_int_equal(gang_store_add(s, "n", 5, &sum), GANG_OK);
  assert_int_equal(sum, 5);
  assert_int_equal(gang_store_add(s, "n", -7, &sum), GANG_OK);
  assert_int_equal(sum, -2);
  assert_int_equal(gang_store_add(s, "n", 0, NULL), GANG_OK);
  expect_stored(s, "n", "-2", 2);
  assert_int_equal(gang_store_add(s, "k", 1, &sum), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "\"k\""));

  /* wait and delete; deleting a missing key is fine. */
  {
    const char* keys[] = {"k", "n", "empty"};
    assert_int_equal(gang_store_wait(s, keys, 3), GANG_OK);
  }
  assert_int_equal(gang_store_delete(s, "k"), GANG_OK);
  assert_int_equal(gang_store_delete(s, "k"), GANG_OK);
  assert_int_equal(gang_store_destroy(s), GANG_OK);
}

static void test_timeouts(void** state) {
  gang_store_t* s = open_store("/timeouts/", 400);
  void* v = NULL;
  size_t n = 0;
  int64_t t0, took;
  (void)state;
  t0 = gang_test_now_ms();
  assert_int_equal(gang_store_get(s, "never", &v, &n), GANG_ERR_TIMEOUT);
  took = gang_test_now_ms() - t0;
  assert_true(took >= 390 && took < 3000);
  assert_non_null(strstr(gang_last_error(), "never"));
  {
    const char* keys[] = {"here", "missing"};
    assert_int_equal(gang_store_set(s, "here", "x", 1), GANG_OK);
    assert_int_equal(gang_store_wait(s, keys, 2), GANG_ERR_TIMEOUT);
    assert_non_null(strstr(gang_last_error(), "missing"));
  }
  /* The store still works after a timeout. */
  expect_stored(s, "here", "x", 1);
  assert_int_equal(gang_store_destroy(s), GANG_OK);
}

static int setter(int rank, int size, const char* store_url, void* arg) {
  gang_store_t* s = NULL;
  char url[128];
  (void)rank;
  (void)size;
  (void)store_url;
  (void)arg;
  snprintf(url, sizeof url, "%s/late/", g_url);
  gang_test_sleep_ms(300);
  CHECK_OK(gang_store_create(url, 0, 10000, &s));
  CHECK_OK(gang_store_set(s, "key", "late", 4));
  CHECK_OK(gang_store_destroy(s));
  return 0;
}

static void test_get_waits_for_another_process(void** state) {
  gang_store_t* s = open_store("/late/", 10000);
  pid_t child;
  int status = 0;
  int64_t t0;
  (void)state;
  child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(setter(0, 1, NULL, NULL));
  t0 = gang_test_now_ms();
  expect_stored(s, "key", "late", 4);
  assert_true(gang_test_now_ms() - t0 >= 250);
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_int_equal(gang_store_destroy(s), GANG_OK);
}

static void test_prefixes_keep_jobs_apart(void** state) {
  gang_store_t* a = open_store("/jobA/", 300);
  gang_store_t* b = open_store("/jobB/", 300);
  gang_store_t* raw = open_store("", 300);
  void* v = NULL;
  size_t n = 0;
  (void)state;
  assert_int_equal(gang_store_set(a, "shared", "A", 1), GANG_OK);
  assert_int_equal(gang_store_get(b, "shared", &v, &n), GANG_ERR_TIMEOUT);
  /* Without a prefix the key is what the url's path made it. */
  expect_stored(raw, "jobA/shared", "A", 1);
  assert_int_equal(gang_store_destroy(a), GANG_OK);
  assert_int_equal(gang_store_destroy(b), GANG_OK);
  assert_int_equal(gang_store_destroy(raw), GANG_OK);
}

static void test_not_redis(void** state) {
  gang_store_t* server = NULL;
  gang_store_t* s = NULL;
  char url[64];
  (void)state;
  /* A gang tcp store on the port: PING gets no PONG. */
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 10000, &server),
                   GANG_OK);
  snprintf(url, sizeof url, "redis://127.0.0.1:%d", gang_store_port(server));
  assert_int_equal(gang_store_create(url, 0, 1000, &s), GANG_ERR_STORE);
  assert_null(s);
  assert_non_null(strstr(gang_last_error(), url));
  assert_int_equal(gang_store_destroy(server), GANG_OK);

  /* Malformed urls. */
  assert_int_equal(gang_store_create("redis://127.0.0.1", 0, 1000, &s),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(gang_store_create("redis://:pw@127.0.0.1:6379", 0, 1000, &s),
                   GANG_ERR_INVALID_ARGUMENT);
}

/* A gang made from GANG_* variables whose GANG_INIT_METHOD is Redis. */
static int redis_rank(int rank, int size, const char* store_url, void* arg) {
  gang_options_t o;
  gang_t* g = NULL;
  char buf[128];
  int32_t v;
  (void)store_url;
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("GANG_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("GANG_SIZE", buf, 1);
  snprintf(buf, sizeof buf, "%s/%s/", g_url, (const char*)arg);
  setenv("GANG_INIT_METHOD", buf, 1);
  setenv("GANG_TIMEOUT_MS", "30000", 1);
  gang_options_init(&o);
  CHECK_OK(gang_create(&o, &g));
  v = rank + 1;
  CHECK_OK(gang_all_reduce(g, &v, &v, 1, GANG_INT32, GANG_SUM, NULL));
  CHECK(v == size * (size + 1) / 2, "sum %d", (int)v);
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_gang_over_redis(void** state) {
  (void)state;
  assert_int_equal(gang_test_run_procs(3, redis_rank, "gang3", 60), 0);
  /* Again on the same prefix: the generation counter keeps them apart. */
  assert_int_equal(gang_test_run_procs(3, redis_rank, "gang3", 60), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls),
      cmocka_unit_test(test_timeouts),
      cmocka_unit_test(test_get_waits_for_another_process),
      cmocka_unit_test(test_prefixes_keep_jobs_apart),
      cmocka_unit_test(test_not_redis),
      cmocka_unit_test(test_gang_over_redis),
  };
  const char* path = find_redis();
  int rc;
  if (path == NULL) {
    printf(
        "SKIP: redis-server is not installed (Debian: apt-get install "
        "redis-server)\n");
    return GANG_TEST_SKIP;
  }
  start_redis(path);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  stop_redis();
  return rc;
}
