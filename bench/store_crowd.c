/* What a crowd of idle connections costs the store's busy ones: the time
 * of one client's get at a TCP store server, first alone, then with K
 * other connections open and silent (a wide job's ranks, waiting), in one
 * run. The idle connections live in a child process, so the server's
 * process holds only its own ends of them.
 *
 *   store_crowd [K] [GETS]       (K: 8000; GETS: 20000)
 *
 * A server that looks at every connection on every request slows down
 * with K; one that looks only at the ready ones does not. */
#define _GNU_SOURCE
#include <gang/gang.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Microseconds per get of a 64-byte value. */
static double time_gets(gang_store_t* client, int gets) {
  void* v = NULL;
  size_t n = 0;
  const double start = now_us();
  for (int i = 0; i < gets; ++i) {
    if (gang_store_get(client, "value", &v, &n) != GANG_OK) {
      fprintf(stderr, "get: %s\n", gang_last_error());
      exit(1);
    }
    gang_free(v);
  }
  return (now_us() - start) / gets;
}

/* Opens `idle` clients of url, each with its connection, says so on
 * `ready`, and holds them until `done` closes. */
static int crowd(const char* url, int idle, int ready, int done) {
  gang_store_t** clients = calloc((size_t)idle, sizeof *clients);
  for (int i = 0; i < idle; ++i) {
    if (gang_store_create(url, 0, 60000, &clients[i]) != GANG_OK) {
      fprintf(stderr, "idle client %d: %s\n", i, gang_last_error());
      return 1;
    }
  }
  char c = 1;
  if (write(ready, &c, 1) != 1) return 1;
  (void)!read(done, &c, 1); /* returns at EOF: the parent is done */
  return 0;
}

int main(int argc, char** argv) {
  const int idle = argc > 1 ? atoi(argv[1]) : 8000;
  const int gets = argc > 2 ? atoi(argv[2]) : 20000;
  struct rlimit fds;
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0) {
    fds.rlim_cur = fds.rlim_max;
    setrlimit(RLIMIT_NOFILE, &fds);
  }
  if (idle < 0 || gets < 1 || (rlim_t)idle + 64 > fds.rlim_cur) {
    fprintf(stderr, "usage: %s [K] [GETS], K below the descriptor limit (%llu)\n", argv[0],
            (unsigned long long)fds.rlim_cur);
    return 2;
  }
  /* A server for the idle ones too: the job-wide limits allow 4 per rank. */
  char limit[32];
  snprintf(limit, sizeof limit, "%d", idle + 1024);
  setenv("GANG_STORE_MAX_CONNECTIONS", limit, 0);
  gang_store_t* server = NULL;
  gang_store_t* client = NULL;
  if (gang_store_create("tcp://127.0.0.1:0", 1, 60000, &server) != GANG_OK) {
    fprintf(stderr, "server: %s\n", gang_last_error());
    return 1;
  }
  char url[64];
  snprintf(url, sizeof url, "tcp://127.0.0.1:%d", gang_store_port(server));
  if (gang_store_create(url, 0, 60000, &client) != GANG_OK ||
      gang_store_set(client, "value", "0123456789abcdef0123456789abcdef"
                                      "0123456789abcdef0123456789abcdef", 64) != GANG_OK) {
    fprintf(stderr, "client: %s\n", gang_last_error());
    return 1;
  }
  time_gets(client, gets / 10); /* warm-up */
  const double alone = time_gets(client, gets);
  int ready[2], done[2];
  if (pipe(ready) != 0 || pipe(done) != 0) return 1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(done[1]);
    _exit(crowd(url, idle, ready[1], done[0]));
  }
  close(ready[1]);
  close(done[0]);
  char c = 0;
  if (read(ready[0], &c, 1) != 1) {
    fprintf(stderr, "the idle clients did not connect\n");
    return 1;
  }
  time_gets(client, gets / 10);
  const double crowded = time_gets(client, gets);
  close(done[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("get at a store server: %.1f us alone, %.1f us with %d idle connections (x%.2f)\n",
         alone, crowded, idle, crowded / alone);
  gang_store_destroy(client);
  gang_store_destroy(server);
  return 0;
}
