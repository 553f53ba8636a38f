/*
 * test_store_security.c - the TCP store server defending itself: tokens,
 * limits on keys, values, total bytes and connections, half-sent requests
 * and idle connections, binding only the host it is given, and
 * gang_store_set checking n before it reads a byte; the quota and deadline
 * of connections not yet authenticated; GANG_STORE_ALLOW_USERS; the
 * warning of a tokenless server that other machines can reach.
 *
 * Each server runs in a forked child process with its own GANG_STORE_*
 * variables, so the limits can be small and the timeouts short, and so its
 * memory can be read from /proc/<pid>/status: the flood tests print the
 * server's peak memory (VmHWM) above what it used before the flood.
 *
 * One CTest entry per test (a cmocka filter). test_bind_loopback exits 77
 * when the machine has no address but loopback.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define MIB (1024L * 1024L)

/* Under AddressSanitizer freed memory waits in a quarantine and every block
 * carries redzones, so the server's RSS says little about what it holds:
 * the peaks are printed but not checked. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_MEMORY 0
#endif
#endif
#ifndef CHECK_MEMORY
#define CHECK_MEMORY 1
#endif

/* Wire format of src/store/tcp_protocol.h. */
enum { OP_SET = 1, OP_GET = 2, OP_ADD = 3, OP_WAIT = 4, OP_PING = 7, OP_AUTH = 8 };
enum { REPLY_OK = 0, REPLY_DENIED = 3, REPLY_REFUSED = 4, REPLY_BUSY = 5 };

static int g_started;      /* tests that started */
static int g_skipped;      /* and of those, skipped */
static char g_skip_reason[256];

/* ---- a server in a child process ---------------------------------------------------- */

typedef struct {
  pid_t pid;
  int port;
  int ctl; /* closing it tells the child to stop */
} server_t;

/* Serves tcp://host:0 from a child with env ("NAME=VALUE", NULL-ended). */
static void start_server(server_t* sv, const char* host, const char* const* env) {
  int up[2], ctl[2];
  pid_t pid;
  int port = -1;
  assert_int_equal(pipe(up), 0);
  assert_int_equal(pipe(ctl), 0);
  fflush(stdout);
  fflush(stderr);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char url[128];
    gang_store_t* s = NULL;
    gang_status_t st;
    char c;
    size_t i;
    close(up[0]);
    close(ctl[1]);
    for (i = 0; env && env[i]; ++i) putenv((char*)env[i]);
    snprintf(url, sizeof url, "tcp://%s:0", host);
    st = gang_store_create(url, 1, 60000, &s);
    port = st == GANG_OK ? gang_store_port(s) : -1;
    if (write(up[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(4);
    if (st != GANG_OK) {
      fprintf(stderr, "server child: gang_store_create(%s): %s: %s\n", url,
              gang_status_name(st), gang_last_error());
      _exit(3);
    }
    while (read(ctl[0], &c, 1) > 0) {
    }
    _exit(gang_store_destroy(s) == GANG_OK ? 0 : 5);
  }
  close(up[1]);
  close(ctl[0]);
  {
    struct pollfd p;
    p.fd = up[0];
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 20000) != 1 || read(up[0], &port, sizeof port) != (ssize_t)sizeof port) {
      port = -1;
    }
  }
  close(up[0]);
  if (port <= 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("the server child did not start");
  }
  sv->pid = pid;
  sv->port = port;
  sv->ctl = ctl[1];
}

/* Stops the child; it must exit 0 (it never crashed meanwhile). */
static void stop_server(server_t* sv) {
  int status = 0;
  const int64_t deadline = gang_test_now_ms() + 20000;
  pid_t got;
  close(sv->ctl);
  while ((got = waitpid(sv->pid, &status, WNOHANG)) == 0 && gang_test_now_ms() < deadline) {
    gang_test_sleep_ms(10);
  }
  if (got != sv->pid) {
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, NULL, 0);
    fail_msg("the server child did not stop");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("the server child ended badly: %s %d", WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  }
}

/* A field of /proc/<pid>/status in kB ("VmRSS", "VmHWM"). */
static long status_kb(pid_t pid, const char* field) {
  char path[64], line[256];
  long kb = -1;
  const size_t len = strlen(field);
  FILE* f;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, field, len) == 0 && line[len] == ':') {
      kb = strtol(line + len + 1, NULL, 10);
      break;
    }
  }
  fclose(f);
  assert_true(kb >= 0);
  return kb;
}

static void url_of(char* url, size_t len, const server_t* sv, const char* token) {
  if (token) {
    snprintf(url, len, "tcp://127.0.0.1:%d?token=%s", sv->port, token);
  } else {
    snprintf(url, len, "tcp://127.0.0.1:%d", sv->port);
  }
}

static gang_store_t* client(const server_t* sv, const char* token, int64_t timeout_ms) {
  char url[512];
  gang_store_t* s = NULL;
  gang_status_t st;
  url_of(url, sizeof url, sv, token);
  st = gang_store_create(url, 0, timeout_ms, &s);
  if (st != GANG_OK) fail_msg("client of %d: %s: %s", sv->port, gang_status_name(st), gang_last_error());
  return s;
}

/* The server still serves a well-behaved client. */
static void still_serves(const server_t* sv, const char* token) {
  gang_store_t* c = client(sv, token, 5000);
  void* v = NULL;
  size_t n = 0;
  int64_t out = 0;
  assert_int_equal(gang_store_set(c, "alive", "yes", 3), GANG_OK);
  assert_int_equal(gang_store_get(c, "alive", &v, &n), GANG_OK);
  assert_int_equal(n, 3);
  assert_memory_equal(v, "yes", 3);
  gang_free(v);
  assert_int_equal(gang_store_add(c, "alive-count", 1, &out), GANG_OK);
  assert_true(out >= 1);
  assert_int_equal(gang_store_destroy(c), GANG_OK);
}

/* ---- raw protocol ------------------------------------------------------------------------ */

static int raw_connect_ip(const char* ip, int port) {
  struct sockaddr_in addr;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1 ||
      connect(fd, (struct sockaddr*)&addr, sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static int raw_connect(int port) {
  const int fd = raw_connect_ip("127.0.0.1", port);
  assert_true(fd >= 0);
  return fd;
}

static void put_le(unsigned char* p, uint64_t v, int bytes) {
  int i;
  for (i = 0; i < bytes; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static void header(unsigned char h[16], int op, uint32_t key_len, uint64_t value_len) {
  h[0] = 'g';
  h[1] = 'S';
  h[2] = 1;
  h[3] = (unsigned char)op;
  put_le(h + 4, key_len, 4);
  put_le(h + 8, value_len, 8);
}

/* Sends all n bytes; 0 when the server closed the connection first. */
static int send_bytes(int fd, const void* data, size_t n) {
  const char* p = (const char*)data;
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return 0;
    p += k;
    n -= (size_t)k;
  }
  return 1;
}

/* Sends a request (header, key, value of n bytes). */
static int send_request(int fd, int op, const char* key, const void* value, size_t n) {
  unsigned char h[16];
  const size_t klen = key ? strlen(key) : 0;
  header(h, op, (uint32_t)klen, n);
  return send_bytes(fd, h, sizeof h) && send_bytes(fd, key, klen) &&
         (n == 0 || send_bytes(fd, value, n));
}

/* Receives exactly n bytes within timeout_ms; 0 on EOF, reset or timeout. */
static int recv_bytes(int fd, void* data, size_t n, int timeout_ms) {
  char* p = (char*)data;
  const int64_t deadline = gang_test_now_ms() + timeout_ms;
  while (n > 0) {
    struct pollfd pf;
    const int64_t left = deadline - gang_test_now_ms();
    ssize_t k;
    if (left <= 0) return 0;
    pf.fd = fd;
    pf.events = POLLIN;
    pf.revents = 0;
    if (poll(&pf, 1, (int)left) <= 0) continue;
    k = recv(fd, p, n, 0);
    if (k <= 0) return 0;
    p += k;
    n -= (size_t)k;
  }
  return 1;
}

/* Reads one reply: its status, and its value (or message) into buf (NUL-
 * terminated, cut to cap-1). -1 when none came. */
static int read_reply(int fd, char* buf, size_t cap, int timeout_ms) {
  unsigned char h[12];
  uint64_t len = 0;
  int i;
  if (!recv_bytes(fd, h, sizeof h, timeout_ms)) return -1;
  if (h[0] != 'g' || h[1] != 'R') return -1;
  for (i = 0; i < 8; ++i) len |= (uint64_t)h[4 + i] << (8 * i);
  if (buf && cap) buf[0] = '\0';
  while (len > 0) {
    char chunk[4096];
    const size_t k = len < sizeof chunk ? (size_t)len : sizeof chunk;
    if (!recv_bytes(fd, chunk, k, timeout_ms)) return -1;
    if (buf && cap) {
      const size_t have = strlen(buf);
      const size_t room = cap - 1 - have;
      const size_t copy = k < room ? k : room;
      memcpy(buf + have, chunk, copy);
      buf[have + copy] = '\0';
    }
    len -= k;
  }
  return h[3];
}

/* 1 if the server closed fd within timeout_ms (what it says first is
 * read and dropped). */
static int closed_within(int fd, int timeout_ms) {
  const int64_t deadline = gang_test_now_ms() + timeout_ms;
  char buf[4096];
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
  }
}

/* Milliseconds until the server closes fd (at most limit_ms; -1 if not). */
static int64_t ms_until_closed(int fd, int limit_ms) {
  const int64_t t0 = gang_test_now_ms();
  if (!closed_within(fd, limit_ms)) return -1;
  return gang_test_now_ms() - t0;
}

static void begin(void) { ++g_started; }

/* ---- tokens --------------------------------------------------------------------------- */

#define TOKEN "s3cr3t-T0ken_for.tests"

static void test_token(void** state) {
  static const char* const env[] = {"GANG_STORE_TOKEN=" TOKEN,
                                    "GANG_STORE_REQUEST_TIMEOUT_MS=1000", NULL};
  server_t sv;
  char url[512], msg[1024];
  gang_store_t* good;
  gang_store_t* bad = NULL;
  gang_status_t st;
  int fd;
  (void)state;
  begin();
  unsetenv("GANG_STORE_TOKEN");
  start_server(&sv, "127.0.0.1", env);
  good = client(&sv, TOKEN, 5000);
  assert_int_equal(gang_store_set(good, "k", "v", 1), GANG_OK);

  /* A client without a token is refused, and told why. */
  url_of(url, sizeof url, &sv, NULL);
  st = gang_store_create(url, 0, 3000, &bad);
  assert_int_equal(st, GANG_ERR_STORE);
  assert_null(bad);
  if (!strstr(gang_last_error(), "requires a token")) {
    fail_msg("tokenless client: unclear message \"%s\"", gang_last_error());
  }
  assert_null(strstr(gang_last_error(), TOKEN));

  /* A wrong token is refused; the message shows neither token. */
  url_of(url, sizeof url, &sv, "WrOnGt0kEn");
  st = gang_store_create(url, 0, 3000, &bad);
  assert_int_equal(st, GANG_ERR_STORE);
  assert_null(bad);
  if (!strstr(gang_last_error(), "token")) fail_msg("wrong token: \"%s\"", gang_last_error());
  assert_null(strstr(gang_last_error(), "WrOnGt0kEn"));
  assert_null(strstr(gang_last_error(), TOKEN));
  /* ... so is a prefix of the right one, and the right one plus a byte. */
  url_of(url, sizeof url, &sv, "s3cr3t");
  assert_int_equal(gang_store_create(url, 0, 3000, &bad), GANG_ERR_STORE);
  url_of(url, sizeof url, &sv, TOKEN "x");
  assert_int_equal(gang_store_create(url, 0, 3000, &bad), GANG_ERR_STORE);

  /* Raw: a request before AUTH is answered "denied", then closed; it did
   * nothing. */
  fd = raw_connect(sv.port);
  assert_true(send_request(fd, OP_ADD, "k", "\1\0\0\0\0\0\0\0", 8));
  assert_int_equal(read_reply(fd, msg, sizeof msg, 3000), REPLY_DENIED);
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* A wrong AUTH, then a request behind it: denied, closed. */
  fd = raw_connect(sv.port);
  assert_true(send_request(fd, OP_AUTH, "nope", NULL, 0));
  send_request(fd, OP_SET, "k", "evil", 4);
  assert_int_equal(read_reply(fd, msg, sizeof msg, 3000), REPLY_DENIED);
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* Garbage first: closed without a word. */
  fd = raw_connect(sv.port);
  send_bytes(fd, "GET / HTTP/1.0\r\n\r\n", 18);
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* An AUTH claiming a huge token: closed. */
  fd = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, OP_AUTH, 1u << 30, 0);
    send_bytes(fd, h, sizeof h);
  }
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* Silent and unauthenticated: closed after the request timeout (1 s). */
  fd = raw_connect(sv.port);
  {
    const int64_t ms = ms_until_closed(fd, 5000);
    if (ms < 800 || ms > 4000) fail_msg("a silent unauthenticated connection closed after %lld ms", (long long)ms);
  }
  close(fd);
  /* Raw with the right token: served. */
  fd = raw_connect(sv.port);
  assert_true(send_request(fd, OP_AUTH, TOKEN, NULL, 0));
  assert_true(send_request(fd, OP_GET, "k", NULL, 0));
  assert_int_equal(read_reply(fd, msg, sizeof msg, 3000), REPLY_OK);
  assert_int_equal(read_reply(fd, msg, sizeof msg, 3000), REPLY_OK);
  assert_string_equal(msg, "v");
  close(fd);

  /* None of it touched the data, and the good client kept working. */
  {
    void* v = NULL;
    size_t n = 0;
    int64_t out = 0;
    assert_int_equal(gang_store_get(good, "k", &v, &n), GANG_OK);
    assert_int_equal(n, 1);
    assert_memory_equal(v, "v", 1);
    gang_free(v);
    assert_int_equal(gang_store_add(good, "k2", 5, &out), GANG_OK);
    assert_int_equal(out, 5); /* the raw ADD before AUTH was not applied */
  }
  /* GANG_STORE_TOKEN in the client's environment works as ?token= does. */
  setenv("GANG_STORE_TOKEN", TOKEN, 1);
  url_of(url, sizeof url, &sv, NULL);
  assert_int_equal(gang_store_create(url, 0, 3000, &bad), GANG_OK);
  assert_int_equal(gang_store_destroy(bad), GANG_OK);
  unsetenv("GANG_STORE_TOKEN");
  assert_int_equal(gang_store_destroy(good), GANG_OK);
  still_serves(&sv, TOKEN);
  stop_server(&sv);
}

/* Urls with a token: parsed, and never echoed. */
static void test_token_urls(void** state) {
  gang_store_t* s = NULL;
  (void)state;
  begin();
  assert_int_equal(gang_store_create("tcp://127.0.0.1:1?user=x", 0, 1000, &s),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:1?token=Sekrit&x=1", 0, 1000, &s),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_null(strstr(gang_last_error(), "Sekrit"));
  assert_non_null(strstr(gang_last_error(), "token=***"));
  assert_int_equal(gang_store_create("tcp://127.0.0.1:1?token=bad%20chars", 0, 1000, &s),
                   GANG_ERR_INVALID_ARGUMENT);
  assert_null(strstr(gang_last_error(), "bad%20chars"));
  setenv("GANG_STORE_TOKEN", "has space", 1);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 1000, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "GANG_STORE_TOKEN"));
  assert_null(strstr(gang_last_error(), "has space"));
  unsetenv("GANG_STORE_TOKEN");
  /* A server and its own client share the url's token. */
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0?token=abc", 1, 3000, &s), GANG_OK);
  assert_int_equal(gang_store_set(s, "x", "1", 1), GANG_OK);
  assert_int_equal(gang_store_destroy(s), GANG_OK);
}

/* ---- malformed and oversized requests ----------------------------------------------------- */

static void test_garbage(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_VALUE_BYTES=1048576", NULL};
  server_t sv;
  char msg[1024];
  int fd, i;
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  /* Random bytes. */
  for (i = 0; i < 4; ++i) {
    unsigned char junk[8192];
    size_t j;
    fd = raw_connect(sv.port);
    for (j = 0; j < sizeof junk; ++j) junk[j] = (unsigned char)(j * 131 + 7 * i + (j >> 7));
    send_bytes(fd, junk, sizeof junk);
    assert_true(closed_within(fd, 3000));
    close(fd);
  }
  /* Right magic, wrong version; then a bad op. */
  fd = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, OP_PING, 0, 0);
    h[2] = 9;
    send_bytes(fd, h, sizeof h);
  }
  assert_true(closed_within(fd, 3000));
  close(fd);
  fd = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, 200, 1, 0);
    send_bytes(fd, h, sizeof h);
  }
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* Claims past the protocol's limits: closed at the header. */
  fd = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, OP_SET, 0xffffffffu, UINT64_MAX);
    send_bytes(fd, h, sizeof h);
  }
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* A value over the server's limit (1 MiB here): refused with a message
   * naming the limit, then closed, whatever the client goes on sending. */
  fd = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, OP_SET, 1, 2 * MIB);
    send_bytes(fd, h, sizeof h);
    send_bytes(fd, "k", 1);
  }
  assert_int_equal(read_reply(fd, msg, sizeof msg, 3000), REPLY_REFUSED);
  if (!strstr(msg, "GANG_STORE_MAX_VALUE_BYTES")) fail_msg("refusal: \"%s\"", msg);
  assert_true(closed_within(fd, 3000));
  close(fd);
  /* Through the API: GANG_ERR_STORE with the server's words. */
  {
    gang_store_t* c = client(&sv, NULL, 5000);
    char* big = (char*)calloc(1, (size_t)(2 * MIB));
    assert_non_null(big);
    assert_int_equal(gang_store_set(c, "big", big, (size_t)(2 * MIB)), GANG_ERR_STORE);
    if (!strstr(gang_last_error(), "GANG_STORE_MAX_VALUE_BYTES")) {
      fail_msg("over the server's limit: \"%s\"", gang_last_error());
    }
    free(big);
    assert_int_equal(gang_store_set(c, "small", "s", 1), GANG_OK);
    assert_int_equal(gang_store_destroy(c), GANG_OK);
  }
  still_serves(&sv, NULL);
  stop_server(&sv);
}

/* Headers that announce 1 GiB values cost only what actually arrives. */
static void test_oversized_claims(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_TOTAL_BYTES=17179869184", NULL};
  server_t sv;
  int fds[3];
  long base, peak;
  int i;
  char* chunk;
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  base = status_kb(sv.pid, "VmRSS");
  chunk = (char*)calloc(1, (size_t)MIB);
  assert_non_null(chunk);
  for (i = 0; i < 3; ++i) {
    unsigned char h[16];
    fds[i] = raw_connect(sv.port);
    header(h, OP_SET, 1, (uint64_t)1 << 30);
    assert_true(send_bytes(fds[i], h, sizeof h));
    assert_true(send_bytes(fds[i], "k", 1));
    assert_true(send_bytes(fds[i], chunk, (size_t)MIB));
  }
  free(chunk);
  gang_test_sleep_ms(500); /* let the server read what was sent */
  peak = status_kb(sv.pid, "VmHWM");
  printf("oversized claims: 3 connections announced 1 GiB values and sent 1 MiB each; "
         "server peak %.1f MiB above its %.1f MiB before\n",
         (double)(peak - base) / 1024, (double)base / 1024);
  if (CHECK_MEMORY && peak - base > 24 * 1024) {
    fail_msg("the server grew by %ld kB on 3 MiB of data", peak - base);
  }
  still_serves(&sv, NULL);
  for (i = 0; i < 3; ++i) close(fds[i]);
  stop_server(&sv);
}

/* The case under the default limits: three connections announce
 * 1 GiB values and send 256 MiB each. The first fits the 2 GiB total; the
 * others are refused at their headers, so only one is ever held. */
static void test_claims_default_limits(void** state) {
  const size_t sent = (size_t)256 * MIB;
  server_t sv;
  int fds[3], i, accepted = 0;
  long base, peak;
  char* chunk;
  char msg[1024];
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", NULL);
  base = status_kb(sv.pid, "VmRSS");
  chunk = (char*)malloc((size_t)(4 * MIB));
  assert_non_null(chunk);
  memset(chunk, 'c', (size_t)(4 * MIB));
  for (i = 0; i < 3; ++i) {
    unsigned char h[16];
    size_t done = 0;
    int ok = 1;
    fds[i] = raw_connect(sv.port);
    header(h, OP_SET, 1, (uint64_t)1 << 30);
    send_bytes(fds[i], h, sizeof h);
    send_bytes(fds[i], "k", 1);
    while (ok && done < sent) {
      ok = send_bytes(fds[i], chunk, (size_t)(4 * MIB));
      done += (size_t)(4 * MIB);
    }
    /* A refused claim was answered at once (what followed it was read and
     * dropped, or refused by a closed socket); one taken in has no answer
     * while its value is incomplete. */
    {
      const int status = read_reply(fds[i], msg, sizeof msg, 1000);
      if (status == -1) {
        ++accepted;
      } else {
        assert_int_equal(status, REPLY_REFUSED);
        if (!strstr(msg, "full")) fail_msg("claim %d: \"%s\"", i, msg);
      }
    }
  }
  free(chunk);
  gang_test_sleep_ms(500);
  peak = status_kb(sv.pid, "VmHWM");
  printf("default limits: 3 connections announced 1 GiB and sent up to 256 MiB each, "
         "%d taken in; server peak %.1f MiB above its %.1f MiB before\n",
         accepted, (double)(peak - base) / 1024, (double)base / 1024);
  assert_int_equal(accepted, 1);
  if (CHECK_MEMORY && peak - base > 256 * 1024 + 32 * 1024) {
    fail_msg("the server grew by %ld kB holding one 256 MiB partial request", peak - base);
  }
  for (i = 0; i < 3; ++i) close(fds[i]);
  still_serves(&sv, NULL);
  stop_server(&sv);
}

/* ---- silence ------------------------------------------------------------------------------ */

static void test_partial_then_silence(void** state) {
  static const char* const env[] = {"GANG_STORE_REQUEST_TIMEOUT_MS=500",
                                    "GANG_STORE_IDLE_TIMEOUT_MS=2000", NULL};
  server_t sv;
  gang_store_t* c;
  int half_header, half_body, idle, parked;
  int64_t t0;
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  c = client(&sv, NULL, 10000);
  t0 = gang_test_now_ms();
  half_header = raw_connect(sv.port);
  half_body = raw_connect(sv.port);
  idle = raw_connect(sv.port);
  parked = raw_connect(sv.port);
  {
    unsigned char h[16];
    header(h, OP_SET, 1, 100);
    assert_true(send_bytes(half_header, h, 8));
    assert_true(send_bytes(half_body, h, sizeof h));
    assert_true(send_bytes(half_body, "k0123456789", 11));
  }
  /* A GET waiting for a key waits on the server, not the client: kept. */
  assert_true(send_request(parked, OP_GET, "later", NULL, 0));
  /* Idle: served once, then silent. (A connection silent from the start
   * never authenticated, and is closed as a half-sent request is.) */
  {
    char msg[64];
    assert_true(send_request(idle, OP_PING, NULL, NULL, 0));
    assert_int_equal(read_reply(idle, msg, sizeof msg, 3000), REPLY_OK);
  }
  /* Half-sent requests: closed after about 500 ms, while a client works. */
  assert_int_equal(gang_store_set(c, "a", "1", 1), GANG_OK);
  assert_true(closed_within(half_header, 3000));
  assert_true(closed_within(half_body, 3000));
  {
    const int64_t ms = gang_test_now_ms() - t0;
    if (ms < 400) fail_msg("half-sent requests were closed after only %lld ms", (long long)ms);
  }
  /* The idle one lasts until about 2000 ms. */
  {
    const int64_t ms = ms_until_closed(idle, 6000);
    const int64_t since = gang_test_now_ms() - t0;
    if (ms < 0 || since < 1800 || since > 5500) {
      fail_msg("an idle connection was closed after %lld ms (idle timeout 2000)", (long long)since);
    }
  }
  /* The parked GET is still there, and gets its value. */
  assert_int_equal(gang_store_set(c, "later", "now", 3), GANG_OK);
  {
    char msg[64];
    assert_int_equal(read_reply(parked, msg, sizeof msg, 3000), REPLY_OK);
    assert_string_equal(msg, "now");
  }
  /* A client whose kept connection the server closed for idleness just
   * opens another. */
  gang_test_sleep_ms(2600);
  {
    void* v = NULL;
    size_t n = 0;
    assert_int_equal(gang_store_get(c, "a", &v, &n), GANG_OK);
    gang_free(v);
  }
  close(half_header);
  close(half_body);
  close(idle);
  close(parked);
  assert_int_equal(gang_store_destroy(c), GANG_OK);
  still_serves(&sv, NULL);
  stop_server(&sv);
}

/* ---- floods ------------------------------------------------------------------------------- */

/* 4000-byte keys with empty values, as fast as one client can set them,
 * for 3 s: the server stops at its total limit (32 MiB here). */
static void test_flood_keys(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_TOTAL_BYTES=33554432", NULL};
  const long limit_kb = 32 * 1024;
  server_t sv;
  gang_store_t* c;
  char* key;
  long base, peak, ok = 0, full = 0, i;
  int64_t t0;
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  c = client(&sv, NULL, 10000);
  base = status_kb(sv.pid, "VmRSS");
  key = (char*)malloc(4001);
  assert_non_null(key);
  memset(key, 'k', 4000);
  key[4000] = '\0';
  assert_int_equal(gang_store_add(c, "counter", 1, NULL), GANG_OK);
  t0 = gang_test_now_ms();
  for (i = 0; gang_test_now_ms() - t0 < 3000; ++i) {
    gang_status_t st;
    snprintf(key, 20, "%019ld", i);
    key[19] = 'k';
    st = gang_store_set(c, key, NULL, 0);
    if (st == GANG_OK) {
      ++ok;
    } else {
      if (st != GANG_ERR_STORE || !strstr(gang_last_error(), "full")) {
        fail_msg("set %ld: %s: %s", i, gang_status_name(st), gang_last_error());
      }
      ++full;
    }
  }
  peak = status_kb(sv.pid, "VmHWM");
  printf("flood of 4000-byte keys: %ld stored, %ld refused as full in 3 s; limit %ld MiB, "
         "server peak %.1f MiB above its %.1f MiB before\n",
         ok, full, limit_kb / 1024, (double)(peak - base) / 1024, (double)base / 1024);
  assert_true(full > 0);
  assert_true(ok <= limit_kb * 1024L / 4000);
  assert_true(ok >= limit_kb * 1024L / 4000 / 2);
  if (CHECK_MEMORY && peak - base > limit_kb + 16 * 1024) {
    fail_msg("the server grew by %ld kB with a limit of %ld kB", peak - base, limit_kb);
  }
  /* A full store still serves reads, and adds to counters it has. */
  {
    void* v = NULL;
    size_t n = 7;
    int64_t out = 0;
    snprintf(key, 20, "%019ld", 5L);
    key[19] = 'k';
    assert_int_equal(gang_store_get(c, key, &v, &n), GANG_OK);
    assert_int_equal(n, 0);
    gang_free(v);
    assert_int_equal(gang_store_set(c, key, "12", 2), GANG_ERR_STORE);
    /* A new 4000-byte counter does not fit in the room left. */
    snprintf(key, 20, "%019ld", 999999999L);
    key[19] = 'k';
    assert_int_equal(gang_store_add(c, key, 1, &out), GANG_ERR_STORE);
    assert_non_null(strstr(gang_last_error(), "full"));
    assert_int_equal(gang_store_add(c, "counter", 1, &out), GANG_OK);
    assert_int_equal(out, 2);
  }
  /* Deleting gives the room back. */
  for (i = 0; i < 10; ++i) {
    snprintf(key, 20, "%019ld", i);
    key[19] = 'k';
    assert_int_equal(gang_store_delete(c, key), GANG_OK);
  }
  assert_int_equal(gang_store_set(c, "after-delete", "x", 1), GANG_OK);
  free(key);
  assert_int_equal(gang_store_destroy(c), GANG_OK);
  stop_server(&sv);
}

/* Large values from several sides: sets until full, claims of 1 GiB,
 * requests stalled half-way, and readers that never read the 8 MiB value
 * they asked for. The server holds at most its total limit (64 MiB). */
static void test_flood_values(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_TOTAL_BYTES=67108864",
                                    "GANG_STORE_REQUEST_TIMEOUT_MS=20000", NULL};
  const long limit_kb = 64 * 1024;
  const size_t value = (size_t)(8 * MIB);
  enum { kReaders = 24, kStalled = 3 };
  server_t sv;
  gang_store_t* c;
  char* buf;
  long base, peak, stored = 0, i;
  int readers[kReaders], stalled[kStalled], claims[3];
  char msg[1024];
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  c = client(&sv, NULL, 20000);
  base = status_kb(sv.pid, "VmRSS");
  buf = (char*)malloc(value);
  assert_non_null(buf);
  memset(buf, 'v', value);

  /* Three connections announce 1 GiB values: refused at the header. */
  for (i = 0; i < 3; ++i) {
    unsigned char h[16];
    claims[i] = raw_connect(sv.port);
    header(h, OP_SET, 1, (uint64_t)1 << 30);
    send_bytes(claims[i], h, sizeof h);
    send_bytes(claims[i], "k", 1);
    send_bytes(claims[i], buf, (size_t)MIB);
    assert_int_equal(read_reply(claims[i], msg, sizeof msg, 5000), REPLY_REFUSED);
    if (!strstr(msg, "full")) fail_msg("a 1 GiB claim: \"%s\"", msg);
  }
  /* 8 MiB values until the store is full. */
  for (i = 0; i < 20; ++i) {
    char key[32];
    gang_status_t st;
    snprintf(key, sizeof key, "v%ld", i);
    st = gang_store_set(c, key, buf, value);
    if (st != GANG_OK) {
      if (st != GANG_ERR_STORE || !strstr(gang_last_error(), "full")) {
        fail_msg("set %s: %s: %s", key, gang_status_name(st), gang_last_error());
      }
      break;
    }
    ++stored;
  }
  assert_true(stored >= 4 && stored <= 8);
  /* Readers that ask for v0 and never read it: one copy, however many. */
  for (i = 0; i < kReaders; ++i) {
    int small = 4096;
    readers[i] = raw_connect(sv.port);
    setsockopt(readers[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    assert_true(send_request(readers[i], OP_GET, "v0", NULL, 0));
  }
  /* v0 deleted while replies still hold it: still counted, so the store
   * stays full. */
  gang_test_sleep_ms(200);
  assert_int_equal(gang_store_delete(c, "v0"), GANG_OK);
  assert_int_equal(gang_store_set(c, "v0", buf, value), GANG_ERR_STORE);
  assert_non_null(strstr(gang_last_error(), "full"));
  /* Requests that announce 8 MiB, send half and stall. */
  for (i = 0; i < kStalled; ++i) {
    unsigned char h[16];
    stalled[i] = raw_connect(sv.port);
    header(h, OP_SET, 1, value);
    send_bytes(stalled[i], h, sizeof h);
    send_bytes(stalled[i], "s", 1);
    send_bytes(stalled[i], buf, value / 2);
  }
  gang_test_sleep_ms(800);
  peak = status_kb(sv.pid, "VmHWM");
  printf("flood of 8 MiB values: %ld stored, %d unread replies, %d stalled sets, 3 claims of "
         "1 GiB; limit %ld MiB, server peak %.1f MiB above its %.1f MiB before\n",
         stored, kReaders, kStalled, limit_kb / 1024, (double)(peak - base) / 1024,
         (double)base / 1024);
  if (CHECK_MEMORY && peak - base > limit_kb + 16 * 1024) {
    fail_msg("the server grew by %ld kB with a limit of %ld kB", peak - base, limit_kb);
  }
  for (i = 0; i < kReaders; ++i) close(readers[i]);
  for (i = 0; i < kStalled; ++i) close(stalled[i]);
  for (i = 0; i < 3; ++i) close(claims[i]);
  free(buf);
  /* With the readers gone, the room v0 held comes back. */
  gang_test_sleep_ms(300);
  buf = (char*)malloc(value);
  assert_non_null(buf);
  memset(buf, 'w', value);
  assert_int_equal(gang_store_set(c, "v0", buf, value), GANG_OK);
  free(buf);
  {
    void* v = NULL;
    size_t n = 0;
    assert_int_equal(gang_store_get(c, "v1", &v, &n), GANG_OK);
    assert_int_equal(n, value);
    assert_int_equal(((const char*)v)[value - 1], 'v');
    gang_free(v);
  }
  assert_int_equal(gang_store_destroy(c), GANG_OK);
  still_serves(&sv, NULL);
  stop_server(&sv);
}

/* ---- connections --------------------------------------------------------------------------- */

static void test_too_many_connections(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_CONNECTIONS=8", NULL};
  server_t sv;
  int fds[16];
  int opened = 0, refused_at = -1, i;
  char msg[1024];
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  /* The server's own process keeps one connection to it; the rest fill. */
  for (i = 0; i < 16; ++i) {
    int status;
    fds[i] = raw_connect(sv.port);
    opened = i + 1;
    send_request(fds[i], OP_PING, NULL, NULL, 0);
    status = read_reply(fds[i], msg, sizeof msg, 3000);
    if (status == REPLY_BUSY) {
      if (!strstr(msg, "GANG_STORE_MAX_CONNECTIONS")) fail_msg("refusal: \"%s\"", msg);
      refused_at = i;
      break;
    }
    assert_int_equal(status, REPLY_OK);
  }
  if (refused_at < 7 || refused_at > 8) {
    fail_msg("connection %d was the first refused, with a limit of 8", refused_at);
  }
  assert_true(closed_within(fds[refused_at], 3000));
  close(fds[refused_at]);
  /* The client API comes back until its timeout, then says why. */
  {
    char url[128];
    gang_store_t* c = NULL;
    url_of(url, sizeof url, &sv, NULL);
    assert_int_equal(gang_store_create(url, 0, 2000, &c), GANG_ERR_STORE);
    if (!strstr(gang_last_error(), "GANG_STORE_MAX_CONNECTIONS")) {
      fail_msg("over the connection limit: \"%s\"", gang_last_error());
    }
  }
  /* Those open are served; once two close, newcomers are too. */
  assert_true(send_request(fds[0], OP_PING, NULL, NULL, 0));
  assert_int_equal(read_reply(fds[0], msg, sizeof msg, 3000), REPLY_OK);
  close(fds[0]);
  close(fds[1]);
  gang_test_sleep_ms(200);
  still_serves(&sv, NULL);
  for (i = 2; i < opened - 1; ++i) close(fds[i]);
  stop_server(&sv);
}

/* Connections that have not authenticated have a quota of their own (4
 * here): a newcomer over it pushes out the oldest, which is told to come
 * back; each is closed after the authentication timeout; a client that
 * speaks at once is served all the while. */
static void test_pending_quota(void** state) {
  static const char* const env[] = {"GANG_STORE_MAX_PENDING_CONNECTIONS=4",
                                    "GANG_STORE_AUTH_TIMEOUT_MS=1500", NULL};
  server_t sv;
  int silent[5], i;
  int64_t t0;
  char msg[1024];
  (void)state;
  begin();
  start_server(&sv, "127.0.0.1", env);
  t0 = gang_test_now_ms();
  for (i = 0; i < 4; ++i) silent[i] = raw_connect(sv.port);
  gang_test_sleep_ms(200);
  silent[4] = raw_connect(sv.port);
  /* The oldest made room, and was told why. */
  assert_int_equal(read_reply(silent[0], msg, sizeof msg, 3000), REPLY_BUSY);
  if (!strstr(msg, "GANG_STORE_MAX_PENDING_CONNECTIONS")) fail_msg("pushed out: \"%s\"", msg);
  assert_true(closed_within(silent[0], 3000));
  /* A client gets in past the silent ones, and is served. */
  still_serves(&sv, NULL);
  /* Those still silent are closed 1.5 s after they came, not 30 s. */
  for (i = 1; i < 5; ++i) {
    const int64_t ms = ms_until_closed(silent[i], 6000);
    const int64_t since = gang_test_now_ms() - t0;
    if (ms < 0 || since > 4500) {
      fail_msg("silent connection %d closed after %lld ms (auth timeout 1500)", i,
               (long long)since);
    }
  }
  for (i = 0; i < 5; ++i) close(silent[i]);
  still_serves(&sv, NULL);
  stop_server(&sv);
}

/* GANG_STORE_ALLOW_USERS: names, uids or "any"; anything else is refused,
 * naming the variable. */
static void test_allow_users_env(void** state) {
  static const char* const good[] = {"root", "0, 65534", "any", "*", NULL};
  gang_store_t* s = NULL;
  int i;
  (void)state;
  begin();
  setenv("GANG_STORE_ALLOW_USERS", "no-such-user-of-gang", 1);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 3000, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "GANG_STORE_ALLOW_USERS"));
  setenv("GANG_STORE_ALLOW_USERS", "root,", 1);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 3000, &s), GANG_ERR_INVALID_ARGUMENT);
  /* "any" in a list: said as such, with the whole value. */
  setenv("GANG_STORE_ALLOW_USERS", "any,nobody", 1);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 3000, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "GANG_STORE_ALLOW_USERS=\"any,nobody\""));
  assert_non_null(strstr(gang_last_error(), "stands alone"));
  unsetenv("GANG_STORE_ALLOW_USERS");
  /* A count of connections is not "a number of bytes". */
  setenv("GANG_STORE_MAX_CONNECTIONS", "abc", 1);
  assert_int_equal(gang_store_create("tcp://127.0.0.1:0", 1, 3000, &s), GANG_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(gang_last_error(), "GANG_STORE_MAX_CONNECTIONS=\"abc\""));
  assert_non_null(strstr(gang_last_error(), "number of connections"));
  unsetenv("GANG_STORE_MAX_CONNECTIONS");
  for (i = 0; good[i]; ++i) {
    setenv("GANG_STORE_ALLOW_USERS", good[i], 1);
    if (gang_store_create("tcp://127.0.0.1:0", 1, 3000, &s) != GANG_OK) {
      fail_msg("GANG_STORE_ALLOW_USERS=%s: %s", good[i], gang_last_error());
    }
    /* The server's own user is served whatever the list says. */
    assert_int_equal(gang_store_set(s, "k", "v", 1), GANG_OK);
    assert_int_equal(gang_store_destroy(s), GANG_OK);
  }
  unsetenv("GANG_STORE_ALLOW_USERS");
}

/* What a server logs as it starts (GANG_LOG_LEVEL=warn): 1 if a line has
 * `needle`. */
static int starts_saying(const char* url, const char* needle) {
  char path[64], line[2048];
  gang_store_t* s = NULL;
  int saved, fd, found = 0;
  FILE* f;
  snprintf(path, sizeof path, "/tmp/gang-store-warning-%d.log", (int)getpid());
  fflush(stderr);
  saved = dup(2);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  {
    const char* level = getenv("GANG_LOG_LEVEL");
    char before[32];
    snprintf(before, sizeof before, "%s", level ? level : "");
    setenv("GANG_LOG_LEVEL", "warn", 1);
    if (gang_store_create(url, 1, 3000, &s) == GANG_OK) gang_store_destroy(s);
    setenv("GANG_LOG_LEVEL", before, 1);
  }
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof line, f)) {
    if (strstr(line, needle)) {
      found = 1;
      fprintf(stderr, "%s: %s", url, line);
    }
  }
  fclose(f);
  unlink(path);
  return found;
}

/* A server without a token that other machines can reach says so once as
 * it starts; on loopback, or with a token, it says nothing. */
static void test_tokenless_warning(void** state) {
  (void)state;
  begin();
  assert_true(starts_saying("tcp://0.0.0.0:0", "without a token"));
  assert_true(starts_saying("tcp://0.0.0.0:0", "GANG_STORE_TOKEN"));
  assert_false(starts_saying("tcp://127.0.0.1:0", "without a token"));
  assert_false(starts_saying("tcp://0.0.0.0:0?token=abc", "without a token"));
}

/* ---- binding ------------------------------------------------------------------------------- */

/* An IPv4 address of this machine other than loopback, or 0. */
static int other_address(char* ip, size_t len) {
  struct ifaddrs* list = NULL;
  struct ifaddrs* a;
  int found = 0;
  if (getifaddrs(&list) != 0) return 0;
  for (a = list; a && !found; a = a->ifa_next) {
    const struct sockaddr_in* in;
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    if (!(a->ifa_flags & IFF_UP) || (a->ifa_flags & IFF_LOOPBACK)) continue;
    in = (const struct sockaddr_in*)a->ifa_addr;
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    found = inet_ntop(AF_INET, &in->sin_addr, ip, (socklen_t)len) != NULL;
  }
  freeifaddrs(list);
  return found;
}

static void test_bind_loopback(void** state) {
  server_t sv;
  char ip[64];
  int fd;
  (void)state;
  begin();
  if (!other_address(ip, sizeof ip)) {
    snprintf(g_skip_reason, sizeof g_skip_reason,
             "this machine has no IPv4 address but loopback to try");
    ++g_skipped;
    skip();
  }
  /* Served on every interface, the other address reaches it: the probe
   * below can tell. */
  start_server(&sv, "0.0.0.0", NULL);
  fd = raw_connect_ip(ip, sv.port);
  if (fd < 0) fail_msg("a server on 0.0.0.0 is not reachable at %s", ip);
  close(fd);
  stop_server(&sv);
  /* Served on 127.0.0.1: loopback only. */
  start_server(&sv, "127.0.0.1", NULL);
  fd = raw_connect_ip(ip, sv.port);
  if (fd >= 0) {
    close(fd);
    fail_msg("a server on 127.0.0.1 accepted a connection at %s:%d", ip, sv.port);
  }
  still_serves(&sv, NULL);
  stop_server(&sv);
  /* Served on that address: not on loopback. */
  start_server(&sv, ip, NULL);
  fd = raw_connect_ip("127.0.0.1", sv.port);
  if (fd >= 0) {
    close(fd);
    fail_msg("a server on %s accepted a connection at 127.0.0.1", ip);
  }
  fd = raw_connect_ip(ip, sv.port);
  assert_true(fd >= 0);
  close(fd);
  stop_server(&sv);
}

/* ---- gang_store_set checks n first ------------------------------------------------------ */

static void test_set_checks_n_first(void** state) {
  static const char* const urls[] = {"tcp://127.0.0.1:0", "memory://set_checks"};
  char small[16] = "0123456789abcde";
  size_t u;
  (void)state;
  begin();
  for (u = 0; u < 2; ++u) {
    gang_store_t* s = NULL;
    gang_status_t st;
    assert_int_equal(gang_store_create(urls[u], 1, 5000, &s), GANG_OK);
    /* n far past what `small` holds: refused before a byte is read. */
    st = gang_store_set(s, "k", small, SIZE_MAX);
    assert_int_equal(st, GANG_ERR_INVALID_ARGUMENT);
    if (!strstr(gang_last_error(), "n 18446744073709551615")) {
      fail_msg("n = SIZE_MAX: \"%s\"", gang_last_error());
    }
    assert_int_equal(gang_store_set(s, "k", small, ((size_t)1 << 30) + 1),
                     GANG_ERR_INVALID_ARGUMENT);
    assert_int_equal(gang_store_set(s, "k", small, sizeof small), GANG_OK);
    assert_int_equal(gang_store_destroy(s), GANG_OK);
  }
  /* A lower limit from the environment, named in the message. */
  setenv("GANG_STORE_MAX_VALUE_BYTES", "8", 1);
  {
    gang_store_t* s = NULL;
    assert_int_equal(gang_store_create("memory://set_checks_env", 0, 5000, &s), GANG_OK);
    assert_int_equal(gang_store_set(s, "k", small, 9), GANG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(gang_last_error(), "GANG_STORE_MAX_VALUE_BYTES"));
    assert_int_equal(gang_store_set(s, "k", small, 8), GANG_OK);
    assert_int_equal(gang_store_destroy(s), GANG_OK);
  }
  setenv("GANG_STORE_MAX_VALUE_BYTES", "lots", 1);
  {
    gang_store_t* s = NULL;
    assert_int_equal(gang_store_create("memory://set_checks_env", 0, 5000, &s),
                     GANG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(gang_last_error(), "GANG_STORE_MAX_VALUE_BYTES"));
  }
  unsetenv("GANG_STORE_MAX_VALUE_BYTES");
}

int main(int argc, char** argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_token),
      cmocka_unit_test(test_token_urls),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_oversized_claims),
      cmocka_unit_test(test_claims_default_limits),
      cmocka_unit_test(test_partial_then_silence),
      cmocka_unit_test(test_flood_keys),
      cmocka_unit_test(test_flood_values),
      cmocka_unit_test(test_too_many_connections),
      cmocka_unit_test(test_pending_quota),
      cmocka_unit_test(test_allow_users_env),
      cmocka_unit_test(test_tokenless_warning),
      cmocka_unit_test(test_bind_loopback),
      cmocka_unit_test(test_set_checks_n_first),
  };
  int rc;
  signal(SIGPIPE, SIG_IGN);
  unsetenv("GANG_STORE_TOKEN");
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  if (rc == 0 && g_started > 0 && g_skipped == g_started) {
    fprintf(stderr, "SKIP: %s\n", g_skip_reason);
    return GANG_TEST_SKIP;
  }
  return rc;
}
