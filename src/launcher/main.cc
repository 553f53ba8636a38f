// gangrun: starts the ranks of a gang program on this node and hosts gang's
// TCP store for them. See `gangrun --help` and options.cc.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/private_dir.h"
#include "base/unique_fd.h"
#include "launcher/cluster.h"
#include "launcher/options.h"
#include "launcher/platform.h"
#include "launcher/program.h"
#include "launcher/rank_env.h"
#include "launcher/replacement.h"
#include "launcher/signals.h"
#include "launcher/supervisor.h"
#include "store/store_options.h"
#include "store/tcp_server.h"

namespace gang::launcher {
namespace {

void say(const std::string& line) {
  const std::string text = "gangrun: " + line + "\n";
  write_all(STDERR_FILENO, text.data(), text.size());
}

// Whether the user named loopback on purpose (a one-host test of several
// nodes) rather than a host name that happens to resolve to it.
bool is_loopback_name(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

Clock::time_point after(double seconds) {
  if (seconds <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

struct Outcome {
  int exit_code = 0;
  int signal = 0;  // re-raised once everything is cleaned up
};

// --store-only: the store alone, until a terminating signal.
Outcome serve_store(const Options& o) {
  SignalFd signals;
  std::string bind = o.master_addr;
  if (bind.size() > 2 && bind.front() == '[' && bind.back() == ']') {
    bind = bind.substr(1, bind.size() - 2);
  }
  std::unique_ptr<store::TcpStoreServer> server;
  std::string token;
  try {
    token = store::token_from_env();
    store::ServerOptions options;
    options.token = token;
    options.allowed_users = store::allowed_users_from_env();
    options.limits = store::limits_from_env();
    options.log = [](const std::string& line) { say("store: " + line); };
    server = std::make_unique<store::TcpStoreServer>(bind, o.master_port, std::move(options));
  } catch (const gang::Error& e) {
    throw LaunchError(std::string("cannot serve the store: ") + e.what());
  }
  // The url on stdout, alone on its line, for scripts to read.
  const std::string url = tcp_url(o.master_addr, server->port()) + "\n";
  write_all(STDOUT_FILENO, url.data(), url.size());
  say("serving the store at " + tcp_url(o.master_addr, server->port()) +
      (token.empty() ? ", without a token" : ", with GANG_STORE_TOKEN's token") +
      "; ranks reach it with GANG_INIT_METHOD=" + tcp_url(o.master_addr, server->port()));
  Outcome outcome;
  for (;;) {
    const int sig = signals.wait_terminating(1000);
    if (sig == 0) continue;
    if (sig != SIGINT && sig != SIGTERM) outcome.signal = sig;
    break;
  }
  say("store stopped");
  return outcome;
}

Outcome launch(const Options& o) {
  // First, before any thread exists: signals arrive on a descriptor.
  SignalFd signals;
  const Clock::time_point job_deadline = after(o.timeout_s);

  SpawnSpec base;
  Program program = resolve_program(o.command, o.module, o.no_python);
  if (o.verbose && !program.python_from.empty()) {
    std::string line;
    for (const std::string& a : program.argv)
      line += (line.empty() ? "" : " ") + a;
    say("running " + line + " (Python from " + program.python_from + ")");
  }
  base.path = std::move(program.path);
  base.argv = std::move(program.argv);
  base::UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) throw LaunchError("cannot open /dev/null");
  base.stdin_fd = dev_null.get();
  // The job's directory: the user's --log-dir, checked, else a fresh one
  // of its own (nobody can guess, plant or own it).
  std::string job_dir;
  try {
    if (!o.log_dir.empty()) {
      base::make_private_dir(o.log_dir, "gangrun: --log-dir");
      job_dir = o.log_dir;
    } else {
      job_dir = base::make_temp_dir(str_cat("gangrun-", ::getpid(), "-"), "gangrun");
    }
  } catch (const gang::Error& e) {
    throw LaunchError(e.what());
  }

  // The job's token: the user's, the same on every node, else (one node)
  // a fresh one. Several nodes cannot share a secret gangrun invents.
  JobLayout job;
  try {
    job.store_token = store::token_from_env();
    if (job.store_token.empty() && o.nnodes == 1) {
      job.store_token = store::random_token();
    }
  } catch (const gang::Error& e) {
    throw LaunchError(e.what());
  }

  // Node 0 hosts the store for the whole job, on --store-bind (by default
  // --master-addr) only.
  std::unique_ptr<store::TcpStoreServer> server;
  job.master_addr = o.master_addr;
  job.store_port = o.master_port;
  std::string store_host;
  if (o.node_rank == 0) {
    std::string bind = o.store_bind.empty() ? o.master_addr : o.store_bind;
    if (bind.size() > 2 && bind.front() == '[' && bind.back() == ']') {
      bind = bind.substr(1, bind.size() - 2);
    }
    try {
      store::ServerOptions options;
      options.token = job.store_token;
      options.allowed_users = store::allowed_users_from_env();
      options.limits = store::limits_from_env(o.world_size());
      options.log = [](const std::string& line) { say("store: " + line); };
      server = std::make_unique<store::TcpStoreServer>(bind, o.master_port,
                                                       std::move(options));
    } catch (const gang::Error& e) {
      throw LaunchError(std::string("cannot host the store: ") + e.what());
    }
    job.store_port = server->port();
    store_host = server->local_address();
    if (o.nnodes > 1 && server->loopback_only() && !is_loopback_name(bind)) {
      say("warning: " + bind +
          " is a loopback address on this host, so no other node can reach "
          "the store; pass --store-bind with an address of this node, or "
          "0.0.0.0");
    }
    // Bound by nobody: the program may host PyTorch's store there.
    job.torch_port = pick_free_port();
  }
  // A server that other machines can reach has said so itself as it
  // started (through options.log). Other users of this machine are kept
  // out by their uid, unless GANG_STORE_ALLOW_USERS lets them in.
  if (job.store_token.empty() && (o.node_rank == 0 || o.verbose) &&
      !(server && !server->loopback_only())) {
    say("warning: GANG_STORE_TOKEN is not set, so the store at " +
        tcp_url(o.master_addr, job.store_port) +
        " takes any client of another machine that reaches it; set it to "
        "one secret on every node");
  }

  std::unique_ptr<Cluster> cluster;
  if (o.nnodes > 1) {
    const Clock::time_point connect_deadline =
        std::min(job_deadline, after(o.connect_timeout_s));
    cluster =
        std::make_unique<Cluster>(o, store_host, job.store_port, job.torch_port,
                                  job.store_token, connect_deadline, signals);
    job.torch_port = cluster->torch_port();
  }
  if (o.verbose) {
    std::string where;
    if (server) {
      for (const std::string& a : server->addresses()) {
        where += (where.empty() ? "" : ", ") + a;
      }
      where = " (listening on " + where + ")";
    }
    say(std::string(server ? "serving" : "using") + " the store at " +
        tcp_url(o.master_addr, job.store_port) + where +
        (job.store_token.empty() ? ", without a token" : ", with a token") +
        "; MASTER_PORT=" + std::to_string(job.torch_port));
  }

  // Every rank records its recent operations, for gang-trace: in the
  // user's GANG_FLIGHT_RECORDER, else in the job's directory (written by a
  // failure, or SIGUSR2 to gangrun).
  const char* recorder = std::getenv("GANG_FLIGHT_RECORDER");
  if (recorder == nullptr || *recorder == '\0') {
    job.flight_recorder = job_dir + "/flight-%r.txt";
  }
  const std::vector<std::string> env = current_environment();
  std::vector<SpawnSpec> specs;
  for (int i = 0; i < o.nproc_per_node; ++i) {
    SpawnSpec spec = base;
    spec.env = rank_environment(env, o, job, i);
    specs.push_back(std::move(spec));
  }
  std::unique_ptr<Replacer> replacer;
  if (o.replace_failed > 0) {
    replacer = std::make_unique<Replacer>(o, job, base, env);
  }
  Supervisor supervisor(o, signals, cluster.get(), job_deadline,
                        job.flight_recorder.empty() ? std::string(recorder)
                                                    : job.flight_recorder,
                        replacer.get());
  Outcome outcome;
  outcome.exit_code = supervisor.run(specs);
  outcome.signal = supervisor.stop_signal();
  // A job directory of gangrun's own that nothing was written to goes
  // (rmdir leaves one with dumps in it).
  if (o.log_dir.empty()) ::rmdir(job_dir.c_str());
  if (server && o.verbose) {
    const store::ServerStats st = server->stats();
    say("the store answered " + std::to_string(st.requests) +
        " requests, accepted " + std::to_string(st.accepted) +
        " connections and refused or closed " + std::to_string(st.denied) +
        " without the token, " + std::to_string(st.other_users) +
        " of other users, " + std::to_string(st.refused) + " over a limit, " +
        std::to_string(st.over_connections) + " past the connection limit, " +
        std::to_string(st.over_pending) +
        " past the quota of unauthenticated ones, " +
        std::to_string(st.malformed) + " not speaking its protocol, " +
        std::to_string(st.timed_out) + " silent too long");
  }
  return outcome;
}

// Dies by sig (default action), as a program interrupted should, so the
// shell running it sees the interruption; returns only if sig does not end
// the process.
void die_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
}

}  // namespace
}  // namespace gang::launcher

int main(int argc, char** argv) {
  using namespace gang::launcher;
  const ParseResult parsed = parse_options(argc, argv);
  if (!parsed.run) {
    std::FILE* to = parsed.exit_code == 0 ? stdout : stderr;
    std::fputs(parsed.message.c_str(), to);
    return parsed.exit_code;
  }
  for (const std::string& note : parsed.notes) say("note: " + note);
  try {
    const Outcome outcome =
        parsed.options.store_only ? serve_store(parsed.options) : launch(parsed.options);
    if (outcome.signal != 0) die_by(outcome.signal);
    return outcome.exit_code;
  } catch (const Interrupted& i) {
    say("received " + signal_name(i.sig) + " while waiting for node 0");
    die_by(i.sig);
    return 128 + i.sig;
  } catch (const std::exception& e) {
    say(e.what());
    return 1;
  }
}
