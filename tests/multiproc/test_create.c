/*
 * test_create.c - creating gangs: every rendezvous (options.store,
 * init_method file:// and tcp://, the environment), reused stores, and
 * creation that cannot complete.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define TIMEOUT_MS 15000
#define WALL_S 60

static char g_url[512]; /* the rendezvous of the current test */

/* A gang of `size` works: sum of rank+1 and the right rank/size/backend
 * (gloo where the test names it; shm, which "auto" picks for ranks of one
 * host, where it names none). */
static int check_backend_gang(gang_t* g, int rank, int size, const char* backend) {
  int64_t x = rank + 1, y = 0;
  CHECK(g != NULL, "no gang");
  CHECK(gang_rank(g) == rank, "rank %d, expected %d", gang_rank(g), rank);
  CHECK(gang_size(g) == size, "size %d, expected %d", gang_size(g), size);
  CHECK(strcmp(gang_backend_name(g), backend) == 0, "backend %s, expected %s",
        gang_backend_name(g), backend);
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == (int64_t)size * (size + 1) / 2, "sum %lld", (long long)y);
  return 0;
}

static int check_gang(gang_t* g, int rank, int size) {
  return check_backend_gang(g, rank, size, "gloo");
}

static int rm_tree(const char* path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  return system(cmd);
}

/* ---- init_method ------------------------------------------------------------------ */

static int proc_init_method(int rank, int size, const char* url, void* arg) {
  gang_options_t o;
  gang_t* g = NULL;
  (void)url;
  (void)arg;
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.init_method = g_url;
  o.timeout_ms = TIMEOUT_MS;
  CHECK_OK(gang_create(&o, &g));
  if (check_gang(g, rank, size)) return 1;
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_init_method_file(void** s) {
  char dir[] = "/tmp/gang_test_create_XXXXXX";
  (void)s;
  assert_non_null(mkdtemp(dir));
  snprintf(g_url, sizeof g_url, "file://%s/rdzv", dir);
  assert_int_equal(gang_test_run_procs(3, proc_init_method, NULL, WALL_S), 0);
  assert_int_equal(rm_tree(dir), 0);
}

/* A port the kernel just handed out and took back (no fixed ports). */
static int free_port(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int port = -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr*)&addr, &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

/* tcp://: rank 0 serves the store on the port, every rank is a client. */
static void test_init_method_tcp(void** s) {
  const int port = free_port();
  (void)s;
  assert_true(port > 0);
  snprintf(g_url, sizeof g_url, "tcp://127.0.0.1:%d", port);
  assert_int_equal(gang_test_run_procs(3, proc_init_method, NULL, WALL_S), 0);
}

/* Rank, size and rendezvous from GANG_RANK, GANG_SIZE, GANG_INIT_METHOD. */
static int proc_from_env(int rank, int size, const char* url, void* arg) {
  gang_options_t o;
  gang_t* g = NULL;
  char buf[32];
  (void)url;
  (void)arg;
  snprintf(buf, sizeof buf, "%d", rank);
  setenv("GANG_RANK", buf, 1);
  snprintf(buf, sizeof buf, "%d", size);
  setenv("GANG_SIZE", buf, 1);
  setenv("GANG_INIT_METHOD", g_url, 1);
  setenv("GANG_TIMEOUT_MS", "15000", 1);
  gang_options_init(&o); /* rank, size -1; no store, no init_method */
  CHECK_OK(gang_create(&o, &g));
  if (check_backend_gang(g, rank, size, "shm")) return 1;
  CHECK(gang_get_timeout(g) == 15000, "GANG_TIMEOUT_MS ignored: %lld",
        (long long)gang_get_timeout(g));
  CHECK_OK(gang_destroy(g));
  return 0;
}

static void test_from_environment(void** s) {
  char dir[] = "/tmp/gang_test_create_XXXXXX";
  (void)s;
  assert_non_null(mkdtemp(dir));
  snprintf(g_url, sizeof g_url, "file://%s", dir);
  assert_int_equal(gang_test_run_procs(3, proc_from_env, NULL, WALL_S), 0);
  assert_int_equal(rm_tree(dir), 0);
}

/* ---- a reused store -------------------------------------------------------------------- */

/* One store, gangs created one after another under one name, and two names
 * at once: each creation rendezvous with its own generation. */
static int proc_reuse(int rank, int size, const char* url, void* arg) {
  gang_store_t* st = NULL;
  gang_options_t o;
  int round;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, TIMEOUT_MS, &st));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = st;
  o.timeout_ms = TIMEOUT_MS;
  for (round = 0; round < 3; ++round) {
    gang_t* g = NULL;
    CHECK_OK(gang_create(&o, &g));
    if (check_gang(g, rank, size)) return 1;
    CHECK_OK(gang_destroy(g));
  }
  {
    gang_t* a = NULL;
    gang_t* b = NULL;
    o.name = "first";
    CHECK_OK(gang_create(&o, &a));
    o.name = "second";
    CHECK_OK(gang_create(&o, &b));
    CHECK(strcmp(gang_name(a), "first") == 0 && strcmp(gang_name(b), "second") == 0,
          "names %s, %s", gang_name(a), gang_name(b));
    if (check_gang(b, rank, size) || check_gang(a, rank, size)) return 1;
    CHECK_OK(gang_destroy(a));
    CHECK_OK(gang_destroy(b));
  }
  CHECK_OK(gang_store_destroy(st));
  return 0;
}

static void test_reused_store(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(3, proc_reuse, NULL, WALL_S), 0);
}

/* ---- creation that cannot complete --------------------------------------------------------- */

#define SLOT_DONE 1

/* Rank 0 creates a gang of 2 alone: GANG_ERR_TIMEOUT after its timeout. */
static int proc_alone(int rank, int size, const char* url, void* arg) {
  gang_store_t* st = NULL;
  gang_options_t o;
  gang_t* g = (gang_t*)&g;
  int64_t t0, dt;
  gang_status_t s;
  (void)arg;
  if (rank != 0) {
    gang_test_wait_shared(SLOT_DONE, 1, 20000);
    return 0;
  }
  CHECK_OK(gang_store_create(url, 0, 10000, &st));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = st;
  o.timeout_ms = 1500;
  t0 = gang_test_now_ms();
  s = gang_create(&o, &g);
  dt = gang_test_now_ms() - t0;
  __atomic_store_n(&gang_test_shared_ints()[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  CHECK(s == GANG_ERR_TIMEOUT, "gang_create without its peer returned %s",
        gang_status_name(s));
  CHECK(g == NULL, "*out set on failure");
  CHECK(dt <= 1500 + 2000, "gang_create gave up after %lld ms (timeout 1500)", (long long)dt);
  CHECK_OK(gang_store_destroy(st));
  return 0;
}

static void test_create_times_out(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(2, proc_alone, NULL, WALL_S), 0);
}

/* A creation that one rank abandoned (it timed out alone) must not stop
 * the next creation of the same gang on the same store: launchers such as
 * torchrun keep their store across restarts. */
static int proc_retry(int rank, int size, const char* url, void* arg) {
  gang_store_t* st = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, 3000, &st));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = st;
  if (rank == 0) {
    o.timeout_ms = 1000;
    CHECK_STATUS(gang_create(&o, &g), GANG_ERR_TIMEOUT);
    __atomic_store_n(&gang_test_shared_ints()[SLOT_DONE], 1, __ATOMIC_SEQ_CST);
  } else {
    CHECK(gang_test_wait_shared(SLOT_DONE, 1, 20000) == 0, "rank 0 never gave up");
  }
  /* Now everybody tries again. */
  o.timeout_ms = 5000;
  CHECK_OK(gang_create(&o, &g));
  if (check_gang(g, rank, size)) return 1;
  CHECK_OK(gang_destroy(g));
  CHECK_OK(gang_store_destroy(st));
  return 0;
}

static void test_retry_after_abandoned_create(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_procs(2, proc_retry, NULL, WALL_S), 0);
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_method_file),
      cmocka_unit_test(test_init_method_tcp),
      cmocka_unit_test(test_from_environment),
      cmocka_unit_test(test_reused_store),
      cmocka_unit_test(test_create_times_out),
      cmocka_unit_test(test_retry_after_abandoned_create),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
