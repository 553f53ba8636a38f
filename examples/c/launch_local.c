/*
 * launch_local.c - start N ranks of a program on this machine.
 *
 *   launch_local [-n N] [-t SECONDS] [--] program [args...]
 *
 * Picks a free TCP port on 127.0.0.1, then runs N copies of the program with
 * GANG_RANK, GANG_SIZE and GANG_INIT_METHOD=tcp://127.0.0.1:<port> set (rank 0
 * serves the store there). If a rank fails, or the time limit (default 120 s)
 * passes, the others are stopped. Exits 0 only if every rank exited 0;
 * otherwise with the first failing rank's exit status (128+signal if it was
 * killed), or 124 on timeout.
 *
 * A small stand-in for a real launcher: it does not host the store itself,
 * so the port could in principle be taken between the probe and rank 0's
 * bind.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 256

static void usage(void) {
  fprintf(stderr,
          "usage: launch_local [-n NRANKS] [-t TIMEOUT_SECONDS] [--] program "
          "[args...]\n");
}

/* A port the kernel considers free right now on 127.0.0.1; -1 on error. */
static int free_port(void) {
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  int port = -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0 &&
      getsockname(fd, (struct sockaddr*)&addr, &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_positive(const char* s, long max, long* out) {
  char* end = NULL;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max) return -1;
  *out = v;
  return 0;
}

static void stop_all(const pid_t* pids, const int* running, int n, int sig) {
  int i;
  for (i = 0; i < n; ++i) {
    if (running[i]) kill(pids[i], sig);
  }
}

int main(int argc, char** argv) {
  long nranks = 2;
  long timeout_s = 120;
  int argi = 1;
  pid_t pids[MAX_RANKS];
  int running[MAX_RANKS];
  int nrunning = 0;
  int result = 0;
  int failed_rank = -1;
  int port;
  char init_method[64];
  double deadline;
  int i;

  while (argi < argc && argv[argi][0] == '-') {
    const char* opt = argv[argi];
    if (strcmp(opt, "--") == 0) {
      ++argi;
      break;
    }
    if ((strcmp(opt, "-n") == 0 || strcmp(opt, "-t") == 0) && argi + 1 < argc) {
      long* dst = opt[1] == 'n' ? &nranks : &timeout_s;
      if (parse_positive(argv[argi + 1], opt[1] == 'n' ? MAX_RANKS : 86400,
                         dst) != 0) {
        fprintf(stderr, "launch_local: bad value \"%s\" for %s\n",
                argv[argi + 1], opt);
        return 2;
      }
      argi += 2;
      continue;
    }
    usage();
    return 2;
  }
  if (argi >= argc) {
    usage();
    return 2;
  }

  port = free_port();
  if (port < 0) {
    perror("launch_local: cannot find a free port");
    return 1;
  }
  snprintf(init_method, sizeof init_method, "tcp://127.0.0.1:%d", port);

  for (i = 0; i < nranks; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("launch_local: fork");
      stop_all(pids, running, i, SIGTERM);
      result = 1;
      nranks = i;
      break;
    }
    if (pid == 0) {
      char buf[32];
      snprintf(buf, sizeof buf, "%d", i);
      setenv("GANG_RANK", buf, 1);
      snprintf(buf, sizeof buf, "%ld", nranks);
      setenv("GANG_SIZE", buf, 1);
      setenv("GANG_INIT_METHOD", init_method, 1);
      execvp(argv[argi], argv + argi);
      fprintf(stderr, "launch_local: cannot run %s: %s\n", argv[argi],
              strerror(errno));
      _exit(127);
    }
    pids[i] = pid;
    running[i] = 1;
    ++nrunning;
  }

  deadline = now_seconds() + (double)timeout_s;
  while (nrunning > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0) {
      if (errno == EINTR) continue;
      perror("launch_local: waitpid");
      return 1;
    }
    if (pid == 0) {
      if (now_seconds() > deadline) {
        fprintf(stderr, "launch_local: timed out after %ld s; stopping ranks\n",
                timeout_s);
        stop_all(pids, running, (int)nranks, SIGKILL);
        if (result == 0) result = 124;
        deadline = now_seconds() + 3600; /* only reap from now on */
      } else {
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
      }
      continue;
    }
    for (i = 0; i < nranks; ++i) {
      int code;
      if (!running[i] || pids[i] != pid) continue;
      running[i] = 0;
      --nrunning;
      if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
      } else {
        code = 1;
      }
      if (code != 0 && result == 0) {
        result = code;
        failed_rank = i;
        if (WIFSIGNALED(status)) {
          fprintf(stderr, "launch_local: rank %d was killed by signal %d\n", i,
                  WTERMSIG(status));
        } else {
          fprintf(stderr, "launch_local: rank %d exited with status %d\n", i,
                  code);
        }
        fprintf(stderr, "launch_local: stopping the other ranks\n");
        stop_all(pids, running, (int)nranks, SIGTERM);
      }
    }
  }
  if (result != 0 && failed_rank < 0 && result != 124) {
    fprintf(stderr, "launch_local: failed to start every rank\n");
  }
  return result;
}
