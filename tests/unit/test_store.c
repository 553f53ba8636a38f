/*
 * test_store.c - the rendezvous stores through gang_store_*: memory://,
 * file:// (a fresh mkdtemp directory) and tcp:// (a server in this process,
 * clients here and in forked processes, and a raw socket sending garbage).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define SHORT_MS 400   /* the timeout of stores that are meant to time out */
#define SLACK_MS 1500  /* how late a timeout may surface */

/* ---- helpers ------------------------------------------------------------------------ */

static gang_store_t* open_store(const char* url, int is_server, int64_t timeout_ms) {
  gang_store_t* s = NULL;
  const gang_status_t st = gang_store_create(url, is_server, timeout_ms, &s);
  if (st != GANG_OK) fail_msg("gang_store_create(%s): %s: %s", url, gang_status_name(st),
                              gang_last_error());
  assert_non_null(s);
  return s;
}

static void expect_stored(gang_store_t* s, const char* key, const void* want, size_t n) {
  void* v = NULL;
  size_t len = 12345;
  const gang_status_t st = gang_store_get(s, key, &v, &len);
  if (st != GANG_OK) fail_msg("get(%s): %s: %s", key, gang_status_name(st), gang_last_error());
  assert_non_null(v); /* even for an empty value */
  assert_int_equal(len, n);
  if (n) assert_memory_equal(v, want, n);
  gang_free(v);
}

/* A get of a missing key: GANG_ERR_TIMEOUT after about timeout_ms. */
static void expect_get_times_out(gang_store_t* s, const char* key, int64_t timeout_ms) {
  void* v = (void*)&v;
  size_t n = 77;
  const int64_t t0 = gang_test_now_ms();
  const gang_status_t st = gang_store_get(s, key, &v, &n);
  const int64_t dt = gang_test_now_ms() - t0;
  if (st != GANG_ERR_TIMEOUT) {
    fail_msg("get of missing \"%s\" returned %s, expected GANG_ERR_TIMEOUT (%s)", key,
             gang_status_name(st), gang_last_error());
  }
  if (dt < timeout_ms - 50 || dt > timeout_ms + SLACK_MS) {
    fail_msg("get of missing \"%s\" timed out after %lld ms; the timeout is %lld ms", key,
             (long long)dt, (long long)timeout_ms);
  }
  assert_null(v);
}

/* ---- the same checks for every kind of store ----------------------------------------------- */

/* `a` and `b` are two handles on one store; `b` has a SHORT_MS timeout. */
static void basic_ops(gang_store_t* a, gang_store_t* b) {
  static const unsigned char binary[] = {0, 1, 2, 0, 255, 0, 'x'};
  int64_t out = -1;
  const char* keys[3] = {"k1", "dir/with/slashes", "k2"};

  /* set / get, both ways, binary-safe, overwrite */
  assert_int_equal(gang_store_set(a, "k1", "hello", 5), GANG_OK);
  expect_stored(b, "k1", "hello", 5);
  assert_int_equal(gang_store_set(b, "k1", "bye", 3), GANG_OK);
  expect_stored(a, "k1", "bye", 3);
  assert_int_equal(gang_store_set(a, "dir/with/slashes", binary, sizeof binary), GANG_OK);
  expect_stored(b, "dir/with/slashes", binary, sizeof binary);
  assert_int_equal(gang_store_set(a, "empty", NULL, 0), GANG_OK);
  expect_stored(b, "empty", NULL, 0);
  assert_int_equal(gang_store_set(a, "weird key: \t%2F..\n", "w", 1), GANG_OK);
  expect_stored(b, "weird key: \t%2F..\n", "w", 1);
  assert_int_equal(gang_store_set(a, ".hidden", "h", 1), GANG_OK);
  expect_stored(b, ".hidden", "h", 1);

  /* add: missing counts as 0, stored as decimal text */
  assert_int_equal(gang_store_add(a, "ctr", 5, &out), GANG_OK);
  assert_int_equal(out, 5);
  assert_int_equal(gang_store_add(b, "ctr", -7, &out), GANG_OK);
  assert_int_equal(out, -2);
  assert_int_equal(gang_store_add(a, "ctr", 0, NULL), GANG_OK);
  expect_stored(b, "ctr", "-2", 2);
  assert_int_equal(gang_store_add(a, "big", INT64_MAX - 1, &out), GANG_OK);
  assert_int_equal(gang_store_add(a, "big", 1, &out), GANG_OK);
  assert_true(out == INT64_MAX);
  /* add on a value set as decimal text */
  assert_int_equal(gang_store_set(a, "txt", "40", 2), GANG_OK);
  assert_int_equal(gang_store_add(b, "txt", 2, &out), GANG_OK);
  assert_int_equal(out, 42);

  /* wait */
  assert_int_equal(gang_store_set(a, "k2", "2", 1), GANG_OK);
  assert_int_equal(gang_store_wait(b, keys, 3), GANG_OK);
  {
    const char* missing[2] = {"k1", "never-set-key"};
    const int64_t t0 = gang_test_now_ms();
    assert_int_equal(gang_store_wait(b, missing, 2), GANG_ERR_TIMEOUT);
    assert_non_null(strstr(gang_last_error(), "never-set-key"));
    assert_true(gang_test_now_ms() - t0 <= SHORT_MS + SLACK_MS);
  }

  /* delete: gone afterwards; deleting a missing key is fine */
  assert_int_equal(gang_store_delete(a, "k1"), GANG_OK);
  assert_int_equal(gang_store_delete(a, "k1"), GANG_OK);
  assert_int_equal(gang_store_delete(b, "no-such-key"), GANG_OK);
  expect_get_times_out(b, "k1", SHORT_MS);
  /* and a deleted key can come back */
  assert_int_equal(gang_store_set(a, "k1", "again", 5), GANG_OK);
  expect_stored(b, "k1", "again", 5);
  /* a deleted counter restarts at 0 */
  assert_int_equal(gang_store_delete(b, "ctr"), GANG_OK);
  assert_int_equal(gang_store_add(a, "ctr", 3, &out), GANG_OK);
  assert_int_equal(out, 3);

  /* missing keys time out */
  expect_get_times_out(b, "missing", SHORT_MS);
}

/* A large value round-trips. */
static void large_value(gang_store_t* a, gang_store_t* b) {
  const size_t n = (size_t)4 << 20;
  unsigned char* buf = (unsigned char*)malloc(n);
  size_t i;
  assert_non_null(buf);
  for (i = 0; i < n; ++i) buf[i] = (unsigned char)(i * 7 + (i >> 12));
  assert_int_equal(gang_store_set(a, "large", buf, n), GANG_OK);
  expect_stored(b, "large", buf, n);
  free(buf);
}

/* ---- memory:// -------------------------------------------------------------------------- */

static void test_memory(void** s) {
  gang_store_t* a;
  gang_store_t* b;
  gang_store_t* other;
  (void)s;
  a = open_store("memory://test_memory", 0, 10000);
  b = open_store("memory://test_memory", 0, SHORT_MS);
  other = open_store("memory://another", 0, SHORT_MS);
  assert_int_equal(gang_store_port(a), -1);
  basic_ops(a, b);
  large_value(a, b);
  /* Names are separate stores. */
  assert_int_equal(gang_store_set(a, "only-in-a", "1", 1), GANG_OK);
  expect_get_times_out(other, "only-in-a", SHORT_MS);
  assert_int_equal(gang_store_destroy(a), GANG_OK);
  assert_int_equal(gang_store_destroy(b), GANG_OK);
  assert_int_equal(gang_store_destroy(other), GANG_OK);
}

/* ---- file:// ------------------------------------------------------------------------------- */

static int rm_tree(const char* path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  return system(cmd);
}

static void test_file(void** s) {
  char tmpl[] = "/tmp/gang_test_store_XXXXXX";
  char url[512], dir[400];
  gang_store_t* a;
  gang_store_t* b;
  struct stat st;
  (void)s;
  assert_non_null(mkdtemp(tmpl));
  /* The directory is created if missing, parents included. */
  snprintf(dir, sizeof dir, "%s/not/yet", tmpl);
  snprintf(url, sizeof url, "file://%s", dir);
  a = open_store(url, 0, 10000);
  b = open_store(url, 0, SHORT_MS);
  assert_int_equal(stat(dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(gang_store_port(a), -1);
  basic_ops(a, b);
  large_value(a, b);
  assert_int_equal(gang_store_destroy(a), GANG_OK);
  /* Data outlives the handles: it is in the directory. */
  a = open_store(url, 0, SHORT_MS);
  expect_stored(a, "k2", "2", 1);
  assert_int_equal(gang_store_destroy(a), GANG_OK);
  assert_int_equal(gang_store_destroy(b), GANG_OK);
  /* A directory that cannot be made. */
  {
    gang_store_t* bad = NULL;
    char path[512];
    FILE* f;
    snprintf(path, sizeof path, "%s/plainfile", tmpl);
    f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(url, sizeof url, "file://%s/plainfile/sub", tmpl);
    assert_int_equal(gang_store_create(url, 0, SHORT_MS, &bad), GANG_ERR_SYSTEM);
    assert_null(bad);
  }
  assert_int_equal(rm_tree(tmpl), 0);
}

/* Whether the file store's files under dir are all this user's alone
 * (mode 0600, no group or other bits). */
static int files_private(const char* dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -type f -perm /077)\"", dir);
  return system(cmd) == 0;
}

/* A store directory nobody else controls: one writable by others, or a
 * symbolic link, is refused naming the fix; key files (the secret among
 * them) and the lock are 0600; a new directory is 0700. As root, one that
 * belongs to another user (nobody) is refused too. */
static void test_file_private(void** s) {
  char tmpl[] = "/tmp/gang_test_store_XXXXXX";
  char url[512], dir[400], link[400];
  gang_store_t* st = NULL;
  struct stat info;
  int64_t sum = 0;
  (void)s;
  assert_non_null(mkdtemp(tmpl));
  /* Created by the store: 0700; its files 0600. */
  snprintf(dir, sizeof dir, "%s/new", tmpl);
  snprintf(url, sizeof url, "file://%s", dir);
  st = open_store(url, 0, SHORT_MS);
  assert_int_equal(gang_store_set(st, "secret", "s3cr3t", 6), GANG_OK);
  assert_int_equal(gang_store_add(st, "counter", 1, &sum), GANG_OK);
  assert_int_equal(stat(dir, &info), 0);
  assert_int_equal(info.st_mode & 0777, 0700);
  assert_true(files_private(dir));
  assert_int_equal(gang_store_destroy(st), GANG_OK);
  /* Writable by everyone: refused, naming the fix. */
  assert_int_equal(chmod(dir, 0777), 0);
  st = NULL;
  assert_int_equal(gang_store_create(url, 0, SHORT_MS, &st), GANG_ERR_INVALID_ARGUMENT);
  assert_null(st);
  assert_non_null(strstr(gang_last_error(), "chmod go-w"));
  assert_non_null(strstr(gang_last_error(), "every user"));
  /* By its group. */
  assert_int_equal(chmod(dir, 0770), 0);
  assert_int_equal(gang_store_create(url, 0, SHORT_MS, &st), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "its group"));
  assert_int_equal(chmod(dir, 0700), 0);
  /* A symbolic link to it. */
  snprintf(link, sizeof link, "%s/link", tmpl);
  assert_int_equal(symlink(dir, link), 0);
  snprintf(url, sizeof url, "file://%s", link);
  assert_int_equal(gang_store_create(url, 0, SHORT_MS, &st), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "symbolic link"));
  /* Another user's. */
  if (geteuid() == 0) {
    assert_int_equal(chown(dir, 65534, 65534), 0);
    snprintf(url, sizeof url, "file://%s", dir);
    assert_int_equal(gang_store_create(url, 0, SHORT_MS, &st), GANG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(gang_last_error(), "belongs to"));
    assert_null(st);
  } else {
    print_message("not root: the case of another user's directory is not run\n");
  }
  assert_int_equal(rm_tree(tmpl), 0);
}

/* ---- tcp:// ------------------------------------------------------------------------------------ */

static gang_store_t* serve(int64_t timeout_ms, char* url, size_t len) {
  gang_store_t* server = open_store("tcp://127.0.0.1:0", 1, timeout_ms);
  const int port = gang_store_port(server);
  assert_true(port > 0 && port < 65536);
  snprintf(url, len, "tcp://127.0.0.1:%d", port);
  return server;
}

static void test_tcp(void** s) {
  char url[64];
  gang_store_t* server;
  gang_store_t* client;
  gang_store_t* shortc;
  int round;
  (void)s;
  for (round = 0; round < 2; ++round) {
    server = serve(10000, url, sizeof url);
    client = open_store(url, 0, 10000);
    shortc = open_store(url, 0, SHORT_MS);
    assert_int_equal(gang_store_port(client), gang_store_port(server));
    assert_int_equal(gang_store_port(shortc), gang_store_port(server));
    if (round == 0) {
      basic_ops(server, shortc); /* the server is a client of itself */
      large_value(server, client);
    } else {
      basic_ops(client, shortc);
      large_value(client, server);
    }
    assert_int_equal(gang_store_destroy(shortc), GANG_OK);
    assert_int_equal(gang_store_destroy(client), GANG_OK);
    assert_int_equal(gang_store_destroy(server), GANG_OK);
  }
}

/* "localhost" and an IPv6 literal also work. */
static void test_tcp_hosts(void** s) {
  gang_store_t* server;
  gang_store_t* client;
  char url[64];
  (void)s;
  server = open_store("tcp://localhost:0", 1, 5000);
  snprintf(url, sizeof url, "tcp://localhost:%d", gang_store_port(server));
  client = open_store(url, 0, 5000);
  assert_int_equal(gang_store_set(client, "h", "1", 1), GANG_OK);
  expect_stored(server, "h", "1", 1);
  assert_int_equal(gang_store_destroy(client), GANG_OK);
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

static void test_tcp_second_server_same_port(void** s) {
  char url[64], portstr[16];
  gang_store_t* server;
  gang_store_t* second = (gang_store_t*)&second;
  gang_status_t st;
  (void)s;
  server = serve(5000, url, sizeof url);
  snprintf(portstr, sizeof portstr, "%d", gang_store_port(server));
  st = gang_store_create(url, 1, 2000, &second);
  assert_int_equal(st, GANG_ERR_SYSTEM);
  assert_null(second);
  /* The message says which port and why. */
  if (strstr(gang_last_error(), portstr) == NULL ||
      strstr(gang_last_error(), "in use") == NULL) {
    fail_msg("unclear message for a port in use: \"%s\"", gang_last_error());
  }
  /* The first server is unharmed. */
  {
    gang_store_t* client = open_store(url, 0, 5000);
    assert_int_equal(gang_store_set(client, "still", "here", 4), GANG_OK);
    expect_stored(server, "still", "here", 4);
    assert_int_equal(gang_store_destroy(client), GANG_OK);
  }
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

/* A client with no server: GANG_ERR_STORE once the timeout passes. */
static void test_tcp_no_server(void** s) {
  char url[64];
  gang_store_t* server;
  gang_store_t* client = (gang_store_t*)&client;
  gang_status_t st;
  int64_t t0, dt;
  (void)s;
  server = serve(1000, url, sizeof url);
  assert_int_equal(gang_store_destroy(server), GANG_OK); /* the port is free again */
  t0 = gang_test_now_ms();
  st = gang_store_create(url, 0, SHORT_MS, &client);
  dt = gang_test_now_ms() - t0;
  if (st == GANG_OK) {
    /* Connecting lazily is allowed; the first call must then fail. */
    int64_t out = 0;
    st = gang_store_add(client, "x", 1, &out);
    dt = gang_test_now_ms() - t0;
    gang_store_destroy(client);
  } else {
    assert_null(client);
  }
  if (st != GANG_ERR_STORE && st != GANG_ERR_TIMEOUT) {
    fail_msg("a client without a server got %s: %s", gang_status_name(st), gang_last_error());
  }
  assert_true(dt <= SHORT_MS + SLACK_MS);
}

/* Destroying the server stops serving: its clients fail, within their timeout. */
static void test_tcp_server_gone(void** s) {
  char url[64];
  gang_store_t* server;
  gang_store_t* client;
  void* v = NULL;
  size_t n = 0;
  gang_status_t st;
  int64_t t0, dt;
  (void)s;
  server = serve(5000, url, sizeof url);
  client = open_store(url, 0, SHORT_MS);
  assert_int_equal(gang_store_set(client, "a", "1", 1), GANG_OK);
  assert_int_equal(gang_store_destroy(server), GANG_OK);
  t0 = gang_test_now_ms();
  st = gang_store_get(client, "a", &v, &n);
  dt = gang_test_now_ms() - t0;
  if (st == GANG_OK) {
    gang_free(v);
    fail_msg("a get succeeded after the server was destroyed");
  }
  assert_true(dt <= SHORT_MS + SLACK_MS);
  assert_int_equal(gang_store_destroy(client), GANG_OK);
}

/* ---- many processes -------------------------------------------------------------------------- */

#define NPROCS 5
#define ADDS 200

/* Each process adds 1 ADDS times and k+1 once; every value add returned
 * is recorded, so duplicates (a lost update) show. */
static int proc_adder(int rank, int size, const char* url, void* arg) {
  volatile int64_t* seen = gang_test_shared_ints();
  gang_store_t* st = NULL;
  int i;
  (void)size;
  (void)arg;
  CHECK_OK(gang_store_create(url, 0, 20000, &st));
  /* Start together. */
  CHECK_OK(gang_store_add(st, "ready", 1, NULL));
  {
    const char* keys[1] = {"go"};
    int64_t v = 0;
    CHECK_OK(gang_store_add(st, "arrived", 1, &v));
    if (v == NPROCS) CHECK_OK(gang_store_set(st, "go", "1", 1));
    CHECK_OK(gang_store_wait(st, keys, 1));
  }
  for (i = 0; i < ADDS; ++i) {
    int64_t v = 0;
    CHECK_OK(gang_store_add(st, "counter", 1, &v));
    CHECK(v >= 1 && v <= NPROCS * ADDS, "add returned %lld", (long long)v);
    CHECK(__atomic_exchange_n(&seen[v - 1], (int64_t)rank + 1, __ATOMIC_SEQ_CST) == 0,
          "two adds both returned %lld", (long long)v);
  }
  CHECK_OK(gang_store_add(st, "weighted", rank + 1, NULL));
  CHECK_OK(gang_store_destroy(st));
  return 0;
}

static void test_tcp_concurrent_adds(void** s) {
  char url[64];
  gang_store_t* server;
  gang_test_opts_t o;
  int64_t total = 0;
  (void)s;
  assert_true(NPROCS * ADDS <= GANG_TEST_SHARED_INTS);
  server = serve(20000, url, sizeof url);
  gang_test_opts_init(&o);
  o.size = NPROCS;
  o.plain_fn = proc_adder;
  o.store_url = url;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  assert_int_equal(gang_store_add(server, "counter", 0, &total), GANG_OK);
  assert_int_equal(total, NPROCS * ADDS);
  assert_int_equal(gang_store_add(server, "weighted", 0, &total), GANG_OK);
  assert_int_equal(total, NPROCS * (NPROCS + 1) / 2);
  expect_stored(server, "counter", "1000", 4);
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

/* A get waits for a key another process sets later. */
static void test_tcp_get_waits(void** s) {
  char url[64];
  gang_store_t* server;
  pid_t pid;
  (void)s;
  server = serve(10000, url, sizeof url);
  fflush(stdout);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    gang_store_t* st = NULL;
    int rc = 1;
    if (gang_store_create(url, 0, 5000, &st) == GANG_OK) {
      gang_test_sleep_ms(300);
      rc = gang_store_set(st, "late", "finally", 7) == GANG_OK ? 0 : 2;
      gang_store_destroy(st);
    }
    _exit(rc);
  }
  {
    const int64_t t0 = gang_test_now_ms();
    expect_stored(server, "late", "finally", 7);
    assert_true(gang_test_now_ms() - t0 >= 200);
  }
  {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

/* ---- a hostile peer ------------------------------------------------------------------------------ */

static int raw_connect(int port) {
  struct sockaddr_in addr;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* 1 if the server closed fd within timeout_ms. */
static int closed_by_server(int fd, int timeout_ms) {
  const int64_t deadline = gang_test_now_ms() + timeout_ms;
  char buf[256];
  for (;;) {
    struct pollfd p;
    const int64_t left = deadline - gang_test_now_ms();
    ssize_t n;
    if (left <= 0) return 0;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, (int)left) <= 0) continue;
    n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
    /* The server may answer something (an error) before closing. */
  }
}

static void send_all(int fd, const void* data, size_t n) {
  const char* p = (const char*)data;
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return; /* closed already: fine */
    p += k;
    n -= (size_t)k;
  }
}

static void test_tcp_garbage(void** s) {
  char url[64];
  gang_store_t* server;
  gang_store_t* before;
  gang_store_t* after;
  int port, fd;
  (void)s;
  server = serve(5000, url, sizeof url);
  port = gang_store_port(server);
  before = open_store(url, 0, 5000);
  assert_int_equal(gang_store_set(before, "k", "v", 1), GANG_OK);

  /* Text that is not the protocol. */
  fd = raw_connect(port);
  assert_true(fd >= 0);
  send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
  assert_true(closed_by_server(fd, 3000));
  close(fd);

  /* Random bytes, lots of them. */
  fd = raw_connect(port);
  assert_true(fd >= 0);
  {
    unsigned char junk[65536];
    size_t i;
    for (i = 0; i < sizeof junk; ++i) junk[i] = (unsigned char)(i * 131 + 7);
    send_all(fd, junk, sizeof junk);
  }
  assert_true(closed_by_server(fd, 3000));
  close(fd);

  /* A well-formed header announcing an absurd key and value. */
  fd = raw_connect(port);
  assert_true(fd >= 0);
  {
    unsigned char hdr[16] = {'g', 'S', 1, 1, 0xff, 0xff, 0xff, 0x7f,
                             0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    send_all(fd, hdr, sizeof hdr);
  }
  assert_true(closed_by_server(fd, 3000));
  close(fd);

  /* Right magic, unknown version / op. */
  fd = raw_connect(port);
  assert_true(fd >= 0);
  {
    unsigned char hdr[17] = {'g', 'S', 99, 200, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'k'};
    send_all(fd, hdr, sizeof hdr);
  }
  assert_true(closed_by_server(fd, 3000));
  close(fd);

  /* A connection that says nothing and one that stops half-way must not
   * block the others. */
  {
    const int idle = raw_connect(port);
    const int half = raw_connect(port);
    unsigned char hdr[8] = {'g', 'S', 1, 1, 3, 0, 0, 0};
    assert_true(idle >= 0 && half >= 0);
    send_all(half, hdr, sizeof hdr);

    /* The client from before still works, and new ones connect. */
    expect_stored(before, "k", "v", 1);
    after = open_store(url, 0, 5000);
    assert_int_equal(gang_store_set(after, "k2", "v2", 2), GANG_OK);
    expect_stored(before, "k2", "v2", 2);
    {
      int64_t out = 0;
      assert_int_equal(gang_store_add(after, "n", 2, &out), GANG_OK);
      assert_int_equal(gang_store_add(before, "n", 3, &out), GANG_OK);
      assert_int_equal(out, 5);
    }
    close(idle);
    close(half);
  }
  assert_int_equal(gang_store_destroy(after), GANG_OK);
  assert_int_equal(gang_store_destroy(before), GANG_OK);
  assert_int_equal(gang_store_destroy(server), GANG_OK);
}

/* Ports are per store. */
static void test_ports(void** s) {
  char url1[64], url2[64];
  gang_store_t* a;
  gang_store_t* b;
  (void)s;
  a = serve(5000, url1, sizeof url1);
  b = serve(5000, url2, sizeof url2);
  assert_int_not_equal(gang_store_port(a), gang_store_port(b));
  /* Separate servers hold separate data. */
  assert_int_equal(gang_store_set(a, "only-a", "1", 1), GANG_OK);
  {
    gang_store_t* cb = open_store(url2, 0, SHORT_MS);
    expect_get_times_out(cb, "only-a", SHORT_MS);
    assert_int_equal(gang_store_destroy(cb), GANG_OK);
  }
  assert_int_equal(gang_store_destroy(a), GANG_OK);
  assert_int_equal(gang_store_destroy(b), GANG_OK);
}

/* A huge timeout is either refused or works; it must not become a deadline
 * in the past. */
static void test_huge_timeouts(void** s) {
  static const char* const urls[] = {"tcp://127.0.0.1:0", "memory://huge"};
  size_t i;
  (void)s;
  for (i = 0; i < 2; ++i) {
    gang_store_t* st = NULL;
    const gang_status_t r = gang_store_create(urls[i], 1, INT64_MAX, &st);
    if (r == GANG_ERR_INVALID_ARGUMENT) continue;
    if (r != GANG_OK) {
      fail_msg("gang_store_create(%s, timeout INT64_MAX) returned %s: %s", urls[i],
               gang_status_name(r), gang_last_error());
    }
    assert_int_equal(gang_store_set(st, "k", "v", 1), GANG_OK);
    expect_stored(st, "k", "v", 1);
    assert_int_equal(gang_store_destroy(st), GANG_OK);
  }
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memory),
      cmocka_unit_test(test_file),
      cmocka_unit_test(test_file_private),
      cmocka_unit_test(test_tcp),
      cmocka_unit_test(test_tcp_hosts),
      cmocka_unit_test(test_tcp_second_server_same_port),
      cmocka_unit_test(test_tcp_no_server),
      cmocka_unit_test(test_tcp_server_gone),
      cmocka_unit_test(test_tcp_concurrent_adds),
      cmocka_unit_test(test_tcp_get_waits),
      cmocka_unit_test(test_tcp_garbage),
      cmocka_unit_test(test_ports),
      cmocka_unit_test(test_huge_timeouts),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
