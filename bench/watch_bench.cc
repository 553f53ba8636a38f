// watch_bench: what idle device gangs cost the job's store.
//
//   LD_LIBRARY_PATH=build/tests/nccl/double GANG_LOG_LEVEL=error
//     build/bench/watch_bench [--ranks P] [--gangs G] [--seconds T]
//
// (one command line).
//
// A device gang (one whose control channel is its own, such as an NCCL
// gang) is watched for its peers' failure notices, which live in the job's
// store. This program serves a TCP store, forks P ranks (default 2) that
// each make G device gangs (default 5: a root gang and G-1 splits of it, as
// a job makes its dp, tp, pp and FSDP gangs), lets them sit idle for T
// seconds (default 3) and counts the requests the store server carried out
// meanwhile. It prints the rate, the rate per process, and that rate scaled
// to a job of 1024 processes (the store of rank 0 serves every process of a
// job alike; a wider job's processes look less often, which the scaling
// takes from notice_look_interval, a model stated as such). With
// GANG_STORE_TOKEN set (as gangrun sets it), the server requires the token and every new connection presents it first (an AUTH
// request). Device gangs need a CUDA runtime and NCCL: the host double of
// tests/nccl_double (as above) or, on a GPU machine, the real libraries.
// Not a test: run it by hand.
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gang/gang.h>

#include "core/notice_watcher.h"
#include "store/store_options.h"
#include "store/tcp_server.h"

namespace {

constexpr int kScaleTo = 1024;

struct Args {
  int ranks = 2;
  int gangs = 5;
  double seconds = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--ranks" && next) {
      a.ranks = std::atoi(next);
    } else if (arg == "--gangs" && next) {
      a.gangs = std::atoi(next);
    } else if (arg == "--seconds" && next) {
      a.seconds = std::atof(next);
    } else {
      std::fprintf(stderr,
                   "usage: watch_bench [--ranks P] [--gangs G] [--seconds T]\n");
      std::exit(2);
    }
    ++i;
  }
  if (a.ranks < 2 || a.gangs < 1 || a.seconds <= 0) {
    std::fprintf(stderr, "watch_bench: needs --ranks >= 2, --gangs >= 1, "
                         "--seconds > 0\n");
    std::exit(2);
  }
  return a;
}

// One rank: makes its gangs, says so on `ready` ('1', or '0' if it could
// not), holds them until `go` closes, then destroys them.
int rank_main(int rank, const Args& a, const std::string& url, int ready,
              int go) {
  std::vector<gang_t*> gangs;
  gang_options_t o;
  gang_options_init(&o);
  o.rank = rank;
  o.size = a.ranks;
  o.init_method = url.c_str();
  o.device_type = GANG_DEVICE_CUDA;
  o.timeout_ms = 60000;
  gang_t* root = nullptr;
  bool ok = gang_create(&o, &root) == GANG_OK;
  if (ok) gangs.push_back(root);
  for (int i = 1; ok && i < a.gangs; ++i) {
    gang_t* g = nullptr;
    ok = gang_split(root, 0, rank, &g) == GANG_OK;
    if (ok) gangs.push_back(g);
  }
  if (!ok) std::fprintf(stderr, "[rank %d] %s\n", rank, gang_last_error());
  const char said = ok ? '1' : '0';
  if (::write(ready, &said, 1) != 1) return 1;
  char c;
  while (::read(go, &c, 1) > 0) {
  }
  for (auto it = gangs.rbegin(); it != gangs.rend(); ++it) gang_destroy(*it);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  // GANG_STORE_TOKEN, when set, is required by the server and presented by
  // the ranks (gangrun always sets one).
  const gang::store::ServerOptions options =
      gang::store::server_options_from_env();
  auto server = std::make_unique<gang::store::TcpStoreServer>("127.0.0.1", 0,
                                                              options);
  const std::string url =
      "tcp://127.0.0.1:" + std::to_string(server->port());

  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) {
    std::perror("pipe");
    return 1;
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < a.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      // _exit: the server and its thread are the parent's.
      ::_exit(rank_main(r, a, url, ready[1], go[0]));
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);

  int made = 0;
  bool ok = true;
  for (int n = 0; n < a.ranks; ++n) {
    pollfd p{ready[0], POLLIN, 0};
    char said = '0';
    if (::poll(&p, 1, 120000) != 1 || ::read(ready[0], &said, 1) != 1) {
      std::fprintf(stderr, "watch_bench: a rank never said it was ready\n");
      ok = false;
      break;
    }
    made += said == '1';
  }
  ok = ok && made == a.ranks;

  if (ok) {
    // Let the gangs settle (their first looks) before counting.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto t0 = std::chrono::steady_clock::now();
    const gang::store::ServerStats s0 = server->stats();
    std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
    const gang::store::ServerStats s1 = server->stats();
    const double dt = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
    const double rate = static_cast<double>(s1.requests - s0.requests) / dt;
    const double conns = static_cast<double>(s1.accepted - s0.accepted) / dt;
    const double per_process = rate / a.ranks;
    std::printf("store traffic of %d idle processes holding %d device gangs "
                "each, over %.1f s:\n",
                a.ranks, a.gangs, dt);
    std::printf("  %10.1f requests/s  (%.1f new connections/s)\n", rate,
                conns);
    std::printf("  %10.1f requests/s per process\n", per_process);
    // A wider job's processes look less often (notice_look_interval): the
    // scaled figure takes the looks at the wider job's pace, and the rest
    // (the heartbeat, 1.3 a second a process) with them, an upper bound.
    const auto here = gang::core::notice_look_interval(a.ranks).count();
    const auto there = gang::core::notice_look_interval(kScaleTo).count();
    const double pace = static_cast<double>(here) / static_cast<double>(there);
    std::printf("  %10.0f requests/s for %d processes x %d gangs (scaled: a look every %lld ms)\n",
                per_process * kScaleTo * pace, kScaleTo, a.gangs,
                static_cast<long long>(there));
  }

  ::close(go[1]);  // the ranks destroy their gangs and exit
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ::close(ready[0]);
  if (!ok || failed != 0) {
    std::fprintf(stderr,
                 "watch_bench: %d of %d ranks failed (device gangs need a "
                 "CUDA runtime and NCCL: LD_LIBRARY_PATH=build/tests/nccl/"
                 "double for the host double)\n",
                 failed, a.ranks);
    return 1;
  }
  return 0;
}
