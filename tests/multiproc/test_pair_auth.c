/*
 * test_pair_auth.c - a stranger cannot take a rank's place in a gang.
 *
 * Three ranks create a gloo gang. Rank 2 reaches the store through a slow
 * path (a relay in its own process that holds back the request publishing
 * its pair addresses for 1.5 s), so ranks 0 and 1 sit with a pair listening
 * for rank 2. Meanwhile the test, as a stranger on the same host, finds the
 * TCP ports ranks 0 and 1 listen on (from /proc, as a port scan would) and
 * connects to each twice: once sending 32 bytes of a forged proof, once
 * sending nothing. The gang must be created and work, and the ranks must
 * close every stranger's connection.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
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

#define LATE_MS 1500
#define MAX_CONNS 64

static int stranger_fds[MAX_CONNS];
static int stranger_count;
static int stranger_closed;
static int listeners_found;

/* ---- rank 2's slow path to the store ------------------------------------ */

struct relay_leg {
  int from, to;
  int hold_addresses; /* client to server: hold back the address request */
};

static void* relay_leg_run(void* p) {
  struct relay_leg* leg = p;
  char buf[65536];
  ssize_t n;
  int held = 0;
  while ((n = recv(leg->from, buf, sizeof buf, 0)) > 0) {
    if (leg->hold_addresses && !held && memmem(buf, (size_t)n, "backend/2", 9)) {
      held = 1;
      gang_test_sleep_ms(LATE_MS);
    }
    if (send(leg->to, buf, (size_t)n, MSG_NOSIGNAL) != n) break;
  }
  shutdown(leg->to, SHUT_WR);
  return NULL;
}

struct relay {
  int listener;
  uint16_t store_port;
};

static void* relay_accept(void* p) {
  struct relay* r = p;
  for (;;) {
    struct sockaddr_in sa;
    struct relay_leg* legs;
    pthread_t t;
    int client = accept(r->listener, NULL, NULL), server;
    if (client < 0) return NULL;
    server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(r->store_port);
    if (server < 0 || connect(server, (struct sockaddr*)&sa, sizeof sa) != 0) {
      close(client);
      continue;
    }
    legs = calloc(2, sizeof *legs);
    legs[0].from = client;
    legs[0].to = server;
    legs[0].hold_addresses = 1;
    legs[1].from = server;
    legs[1].to = client;
    pthread_create(&t, NULL, relay_leg_run, &legs[0]);
    pthread_detach(t);
    pthread_create(&t, NULL, relay_leg_run, &legs[1]);
    pthread_detach(t);
  }
}

/* Starts the relay to the store at `url` ("tcp://127.0.0.1:PORT") and
 * writes its own url into out. */
static int start_relay(const char* url, char* out, size_t out_len) {
  static struct relay r;
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  const char* colon = strrchr(url, ':');
  pthread_t t;
  if (colon == NULL) return -1;
  r.store_port = (uint16_t)atoi(colon + 1);
  r.listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (r.listener < 0 || bind(r.listener, (struct sockaddr*)&sa, sizeof sa) != 0 ||
      listen(r.listener, 16) != 0 ||
      getsockname(r.listener, (struct sockaddr*)&sa, &len) != 0) {
    return -1;
  }
  snprintf(out, out_len, "tcp://127.0.0.1:%d", ntohs(sa.sin_port));
  return pthread_create(&t, NULL, relay_accept, &r) == 0 ? 0 : -1;
}

/* ---- the ranks --------------------------------------------------------- */

static int proc_member(int rank, int size, const char* url, void* arg) {
  gang_store_t* store = NULL;
  gang_options_t o;
  gang_t* g = NULL;
  int64_t x, y = 0;
  char relayed[64];
  (void)arg;
  if (rank == 2) {
    CHECK(start_relay(url, relayed, sizeof relayed) == 0, "cannot start the relay");
    url = relayed;
  }
  CHECK_OK(gang_store_create(url, 0, 30000, &store));
  gang_options_init(&o);
  o.backend = "gloo";
  o.rank = rank;
  o.size = size;
  o.store = store;
  o.timeout_ms = 20000;
  o.name = "guarded";
  CHECK_OK(gang_create(&o, &g));
  x = rank + 1;
  CHECK_OK(gang_all_reduce(g, &x, &y, 1, GANG_INT64, GANG_SUM, NULL));
  CHECK(y == 6, "sum %lld, expected 6", (long long)y);
  CHECK_OK(gang_destroy(g));
  gang_store_destroy(store);
  return 0;
}

/* Whether process `pid` holds socket inode `inode`. */
static int owns_socket(pid_t pid, unsigned long inode) {
  char path[64], link[64], want[64];
  struct dirent* e;
  int found = 0;
  DIR* d;
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  snprintf(want, sizeof want, "socket:[%lu]", inode);
  d = opendir(path);
  if (d == NULL) return 0;
  while (!found && (e = readdir(d)) != NULL) {
    char fd_path[320];
    ssize_t n;
    snprintf(fd_path, sizeof fd_path, "%s/%s", path, e->d_name);
    n = readlink(fd_path, link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    found = strcmp(link, want) == 0;
  }
  closedir(d);
  return found;
}

/* Parses a line of /proc/net/tcp; 1 for a listening socket. */
static int parse_listener(const char* line, unsigned int* addr,
                          unsigned int* port, unsigned long* inode) {
  unsigned int state;
  return sscanf(line, " %*d: %x:%x %*x:%*x %x %*x:%*x %*x:%*x %*x %*u %*u %lu",
                addr, port, &state, inode) == 4 &&
         state == 0x0A;
}

/* Listening sockets of ranks 0 and 1. */
static int count_listeners(const pid_t* pids) {
  char line[512];
  int n = 0;
  FILE* f = fopen("/proc/net/tcp", "r");
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned int addr, port;
    unsigned long inode;
    if (!parse_listener(line, &addr, &port, &inode)) continue;
    n += owns_socket(pids[0], inode) || owns_socket(pids[1], inode);
  }
  fclose(f);
  return n;
}

static void connect_to(uint32_t addr_be, uint16_t port, int send_forgery) {
  struct sockaddr_in sa;
  int fd;
  if (stranger_count == MAX_CONNS) return;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = addr_be;
  sa.sin_port = htons(port);
  if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0) {
    close(fd);
    return;
  }
  if (send_forgery) {
    char forged[32];
    size_t i;
    for (i = 0; i < sizeof forged; ++i) forged[i] = (char)rand();
    if (send(fd, forged, sizeof forged, MSG_NOSIGNAL) < 0) {
      close(fd);
      return;
    }
  }
  stranger_fds[stranger_count++] = fd;
}

/* The stranger: connects to every port ranks 0 and 1 listen on while rank 2
 * is still away, then waits for the ranks to close those connections. */
static void stranger(const pid_t* pids, int size, void* arg) {
  char line[512];
  FILE* f;
  int i;
  int64_t end = gang_test_now_ms() + 20000, first_seen = -1;
  (void)size;
  (void)arg;
  /* Wait until ranks 0 and 1 listen, and a little longer, so that their
   * own pair has connected and only the pairs waiting for rank 2 listen. */
  while (gang_test_now_ms() < end) {
    if (count_listeners(pids) >= 2 && first_seen < 0) first_seen = gang_test_now_ms();
    if (first_seen >= 0 && gang_test_now_ms() - first_seen > LATE_MS / 5) break;
    gang_test_sleep_ms(10);
  }
  f = fopen("/proc/net/tcp", "r");
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL) {
    unsigned int addr, port;
    unsigned long inode;
    if (!parse_listener(line, &addr, &port, &inode)) continue;
    if (!owns_socket(pids[0], inode) && !owns_socket(pids[1], inode)) continue;
    ++listeners_found;
    /* /proc/net/tcp prints the address as the host-order value of the
     * network-order word. */
    connect_to(addr, (uint16_t)port, 1);
    connect_to(addr, (uint16_t)port, 0);
  }
  fclose(f);
  for (i = 0; i < stranger_count; ++i) {
    struct pollfd p;
    int64_t end = gang_test_now_ms() + 15000;
    p.fd = stranger_fds[i];
    p.events = POLLIN;
    while (gang_test_now_ms() < end) {
      char c;
      ssize_t n;
      if (poll(&p, 1, 100) <= 0) continue;
      n = recv(p.fd, &c, 1, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        ++stranger_closed;
        break;
      }
      if (n > 0) break; /* a rank spoke to the stranger: counts as open */
    }
    close(p.fd);
  }
}

static void test_stranger_cannot_take_a_pair(void** s) {
  gang_test_opts_t o;
  (void)s;
  gang_test_opts_init(&o);
  o.size = 3;
  o.plain_fn = proc_member;
  o.parent_fn = stranger;
  o.wall_timeout_s = 60;
  assert_int_equal(gang_test_run(&o), 0);
  fprintf(stderr, "stranger: %d listening ports of ranks 0 and 1, %d connections, "
          "%d closed by the ranks\n", listeners_found, stranger_count,
          stranger_closed);
  /* Ranks 0 and 1 each listen for rank 2 while it is away. */
  assert_true(listeners_found >= 2);
  assert_int_equal(stranger_count, 2 * listeners_found);
  assert_int_equal(stranger_closed, stranger_count);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stranger_cannot_take_a_pair),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
