/*
 * launcher_allreduce.c - a gang program for gangrun's tests.
 *
 *   launcher_allreduce [--from-env] [--exit-rank R --exit-code C] [--free-port]
 *
 * Creates a gang from the environment gangrun exports (rank and size -1),
 * all-reduces (rank + 1) as int64 and checks the sum is size*(size+1)/2, then
 * prints "rank R of N: sum S ok". Exits 0 on success, 1 on failure.
 *
 * By default it opens GANG_INIT_METHOD itself as a store *client* and passes
 * it as options.store, so no rank tries to serve the port gangrun already
 * serves. --from-env instead leaves init_method NULL, as an ordinary program
 * would, which needs gang_create to join a store that is already served.
 *
 * --exit-rank R --exit-code C: after the gang is made, rank R exits with
 * status C while the others go on to the all-reduce, which fails; they then
 * hang (sleep), so gangrun must stop them, and rank R stays the only rank
 * that ended by itself.
 *
 * --free-port: prints a TCP port that is free right now and exits.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gang/gang.h>

static int free_port(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = -1;
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr*)&addr, &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

#define CHECK(call)                                                    \
  do {                                                                 \
    gang_status_t s_ = (call);                                         \
    if (s_ != GANG_OK) {                                               \
      fprintf(stderr, "launcher_allreduce: %s: %s: %s\n", #call,       \
              gang_status_name(s_), gang_last_error());                \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main(int argc, char** argv) {
  int from_env = 0;
  int exit_rank = -1;
  int exit_code = 0;
  int i;
  gang_options_t options = GANG_OPTIONS_INITIALIZER;
  gang_store_t* store = NULL;
  gang_t* gang = NULL;
  int64_t value, sum, expect;
  int rank, size;

  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--from-env")) {
      from_env = 1;
    } else if (!strcmp(argv[i], "--exit-rank") && i + 1 < argc) {
      exit_rank = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--exit-code") && i + 1 < argc) {
      exit_code = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--free-port")) {
      int port = free_port();
      if (port < 0) return 1;
      printf("%d\n", port);
      return 0;
    } else {
      fprintf(stderr, "launcher_allreduce: unknown argument %s\n", argv[i]);
      return 2;
    }
  }

  if (!from_env && getenv("GANG_INIT_METHOD")) {
    CHECK(gang_store_create(getenv("GANG_INIT_METHOD"), 0, 0, &store));
    options.store = store;
  }
  CHECK(gang_create(&options, &gang));
  rank = gang_rank(gang);
  size = gang_size(gang);
  if (rank == exit_rank) {
    fprintf(stderr, "rank %d: exiting with status %d\n", rank, exit_code);
    fflush(stderr);
    _exit(exit_code);
  }

  value = rank + 1;
  if (exit_rank >= 0) {
    gang_status_t st =
        gang_all_reduce(gang, &value, &sum, 1, GANG_INT64, GANG_SUM, NULL);
    fprintf(stderr, "rank %d: all-reduce without rank %d: %s; hanging\n", rank,
            exit_rank, gang_status_name(st));
    fflush(stderr);
    sleep(300);
    return 1;
  }
  CHECK(gang_all_reduce(gang, &value, &sum, 1, GANG_INT64, GANG_SUM, NULL));
  expect = (int64_t)size * (size + 1) / 2;
  if (sum != expect) {
    fprintf(stderr, "rank %d of %d: sum %lld, expected %lld\n", rank, size,
            (long long)sum, (long long)expect);
    return 1;
  }
  printf("rank %d of %d: sum %lld ok\n", rank, size, (long long)sum);
  CHECK(gang_destroy(gang));
  CHECK(gang_store_destroy(store));
  return 0;
}
