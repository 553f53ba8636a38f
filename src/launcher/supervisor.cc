#include "launcher/supervisor.h"

#include <signal.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

namespace gang::launcher {

namespace {

// How long to keep reading a rank's pipes after it has ended: something it
// started may still hold them open.
constexpr std::chrono::milliseconds kDrainAfterExit(1000);
// How long node 0 of an aborted job waits for nodes that have not joined.
constexpr std::chrono::seconds kLingerForLateNodes(5);

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(s));
}

std::string format_seconds(double s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

std::string plural(size_t n, const char* one) {
  return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
}

}  // namespace

Supervisor::Supervisor(const Options& o, SignalFd& signals, Cluster* cluster,
                       Clock::time_point job_deadline,
                       std::string flight_recorder, Replacer* replacer)
    : options_(o),
      signals_(signals),
      cluster_(cluster),
      job_deadline_(job_deadline),
      replacer_(replacer) {
  const size_t slash = flight_recorder.rfind('/');
  if (!flight_recorder.empty()) {
    flight_dir_ = slash == std::string::npos ? "." : flight_recorder.substr(0, slash);
  }
}

void Supervisor::ask_for_dumps() {
  size_t asked = 0;
  for (Rank& r : ranks_) {
    if (!r.child.running()) continue;
    r.child.signal(SIGURG);  // its group: a wrapper's child too
    ++asked;
  }
  say("received SIGUSR2: asked " + plural(asked, "rank") +
      " for their recent operations (SIGURG)" +
      (flight_dir_.empty() ? std::string("; GANG_FLIGHT_RECORDER is unset, so "
                                         "they have none")
                           : "; read them with: gang-trace " + flight_dir_));
}

std::string Supervisor::trace_hint() const {
  struct stat st {};
  if (flight_dir_.empty() || ::stat(flight_dir_.c_str(), &st) != 0) return "";
  return "; the ranks' recent operations: gang-trace " + flight_dir_;
}

void Supervisor::say(const std::string& line) {
  stderr_.write("gangrun: " + line + "\n");
}

int Supervisor::run(const std::vector<SpawnSpec>& specs) {
  try {
    spawn_all(specs);
  } catch (const LaunchError& e) {
    begin_stop(Reason::kSetup, 1, e.what(), SIGTERM);
  }
  loop();
  return exit_code_;
}

void Supervisor::spawn_all(const std::vector<SpawnSpec>& specs) {
  ranks_.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const int local = static_cast<int>(i);
    spawn(specs[i], options_.node_rank * options_.nproc_per_node + local, local,
          0);
  }
}

std::string Supervisor::label(const Rank& r) {
  return r.join == 0 ? "rank " + std::to_string(r.rank)
                     : "join " + std::to_string(r.join);
}

void Supervisor::spawn(const SpawnSpec& spec, int rank, int local_rank,
                       int join) {
  Rank r;
  r.rank = rank;
  r.local_rank = local_rank;
  r.join = join;
  const std::string name = label(r);
  std::shared_ptr<Sink> tee;
  if (options_.tee) {
    const std::string path =
        options_.log_dir + "/" +
        (join == 0 ? "rank-" + std::to_string(rank)
                   : "join-" + std::to_string(join)) +
        ".log";
    // The directory is the user's alone (main.cc); a link there is still
    // never followed.
    base::UniqueFd fd(::open(path.c_str(),
                             O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) {
      throw LaunchError("cannot open " + path + ": " +
                        (errno == ELOOP ? std::string("it is a symbolic link, which gangrun "
                                                      "never follows")
                                        : errno_text(errno)));
    }
    tee = std::make_shared<Sink>(std::move(fd));
  }
  base::UniqueFd out;
  base::UniqueFd err;
  r.child = Child::spawn(spec, &out, &err);
  const std::string prefix = options_.prefix ? "[" + name + "] " : "";
  r.out = std::make_unique<OutputStream>(std::move(out), &stdout_, prefix, tee);
  r.err = std::make_unique<OutputStream>(std::move(err), &stderr_, prefix, tee);
  if (options_.verbose) {
    say("started " + name + " (pid " + std::to_string(r.child.pid()) + ")" +
        (join == 0 ? "" : " in place of rank " + std::to_string(rank)));
  }
  ranks_.push_back(std::move(r));
}

void Supervisor::replace(size_t i, const std::string& line) {
  const int rank = ranks_[i].rank;
  Replacer::Joiner j = replacer_->next(ranks_[i].local_rank, rank);
  say(line + "; starting join " + std::to_string(j.number) +
      " in its place (GANG_JOIN=1 GANG_REPLACES=" + std::to_string(rank) +
      ", replacement " + std::to_string(j.number) + " of " +
      std::to_string(replacer_->limit()) + ")");
  try {
    spawn(j.spec, rank, ranks_[i].local_rank, j.number);
  } catch (const LaunchError& e) {
    begin_stop(Reason::kSetup, 1,
               "cannot start join " + std::to_string(j.number) + ": " +
                   e.what(),
               SIGTERM);
  }
}

size_t Supervisor::running() const {
  return static_cast<size_t>(
      std::count_if(ranks_.begin(), ranks_.end(),
                    [](const Rank& r) { return r.child.running(); }));
}

bool Supervisor::streams_open() const {
  for (const Rank& r : ranks_) {
    if (r.out->open() || r.err->open()) return true;
  }
  return false;
}

void Supervisor::close_streams() {
  for (Rank& r : ranks_) {
    r.out->close();
    r.err->close();
  }
}

bool Supervisor::begin_stop(Reason reason, int exit_code,
                            const std::string& message, int sig,
                            const std::string& for_other_nodes) {
  if (reason_ != Reason::kNone) return false;
  reason_ = reason;
  exit_code_ = exit_code;
  say(message);
  if (cluster_ && reason != Reason::kRemote) {
    cluster_->report_failure(
        exit_code,
        for_other_nodes.empty()
            ? "node " + std::to_string(options_.node_rank) + ": " + message
            : for_other_nodes);
  }
  if (options_.verbose && running() > 0) {
    say("sending " + signal_name(sig) + " to " + plural(running(), "rank"));
  }
  for (const Rank& r : ranks_) r.child.signal(sig);
  kill_deadline_ = Clock::now() + seconds(options_.grace_s);
  return true;
}

void Supervisor::kill_all(const std::string& why) {
  killed_ = true;
  const size_t n = running();
  if (n == 0) return;
  say(why + "; sending SIGKILL to " + plural(n, "rank"));
  for (const Rank& r : ranks_) r.child.signal(SIGKILL);
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGCHLD) return;
  if (sig == SIGUSR2) {
    ask_for_dumps();
    return;
  }
  if (local_done_) {
    // Node 0 waiting for the other nodes: stop waiting.
    if (!waiting_done_) {
      if (reason_ == Reason::kNone) {
        reason_ = Reason::kSignal;
        exit_code_ = 128 + sig;
        if (cluster_) {
          cluster_->report_failure(exit_code_, "node 0 was interrupted");
        }
      }
      say("received " + signal_name(sig) +
          "; not waiting for the other nodes any longer");
      waiting_done_ = true;
    }
    return;
  }
  const size_t n = running();
  if (reason_ == Reason::kNone) {
    begin_stop(
        Reason::kSignal, 128 + sig,
        "received " + signal_name(sig) + "; stopping " + plural(n, "rank"),
        sig);
    return;
  }
  if (!killed_) kill_all("received " + signal_name(sig) + " again");
}

void Supervisor::on_cluster() {
  cluster_state_ = cluster_->state();
  const ClusterState& s = cluster_state_;
  if (s.remote_failure && reason_ == Reason::kNone) {
    const size_t n = running();
    std::string message = s.remote_what;
    if (n > 0) message += "; stopping " + plural(n, "local rank");
    begin_stop(Reason::kRemote, s.remote_exit_code, message, SIGTERM);
  }
  check_waiting();
}

void Supervisor::check_waiting() {
  if (!cluster_ || !local_done_ || waiting_done_) return;
  const ClusterState& s = cluster_state_;
  // An aborted job waits for the nodes that joined, and a little for the
  // others, so a node starting late still learns of the abort.
  const bool aborted_and_settled = reason_ != Reason::kNone &&
                                   s.joined_finished && linger_deadline_ &&
                                   Clock::now() >= *linger_deadline_;
  if (s.all_finished || aborted_and_settled) {
    if (options_.verbose) say("every node has finished");
    waiting_done_ = true;
  } else if (!s.lost_nodes.empty()) {
    std::string nodes;
    for (int k : s.lost_nodes)
      nodes += (nodes.empty() ? "" : ", ") + std::to_string(k);
    say("no sign of life from node " + nodes +
        " for 15 s; not waiting for it any longer");
    if (exit_code_ == 0) exit_code_ = 1;
    waiting_done_ = true;
  } else if (s.store_lost) {
    say("lost the store: " + s.store_error);
    waiting_done_ = true;
  }
}

void Supervisor::reap() {
  // By index: a replacement is appended to ranks_ as the loop runs.
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& r = ranks_[i];
    if (!r.child.try_reap()) continue;
    const ExitStatus st = r.child.status();
    const std::string who =
        label(r) + " (pid " + std::to_string(r.child.pid()) + ")";
    const std::string line = who + " " + st.describe();
    if (!st.success() && reason_ == Reason::kNone) {
      if (replacer_ && replacer_->available()) {
        replace(i, line);
        continue;
      }
      const size_t n = running();
      begin_stop(Reason::kFailure, st.exit_code(), line, SIGTERM,
                 who + " on node " + std::to_string(options_.node_rank) + " " +
                     st.describe());
      if (replacer_) {
        say("no replacement left (--replace-failed " +
            std::to_string(replacer_->limit()) + ": " +
            plural(static_cast<size_t>(replacer_->used()), "replacement") +
            " started)");
      }
      if (n > 0 && !options_.verbose) {
        say("stopping the other " + plural(n, "rank") +
            " (SIGTERM, SIGKILL after " + format_seconds(options_.grace_s) +
            " s)" + trace_hint());
      }
    } else if (options_.verbose) {
      say(line);
    }
  }
}

void Supervisor::check_deadlines() {
  const auto now = Clock::now();
  if (reason_ == Reason::kNone && now >= job_deadline_) {
    const size_t n = running();
    begin_stop(Reason::kTimeout, 124,
               "timed out after " + format_seconds(options_.timeout_s) + " s" +
                   (n > 0 ? "; stopping " + plural(n, "rank") : ""),
               SIGTERM);
    if (local_done_) waiting_done_ = true;
  }
  check_waiting();
  if (kill_deadline_ && !killed_ && now >= *kill_deadline_) {
    kill_all("ranks still running " + format_seconds(options_.grace_s) +
             " s after " +
             (reason_ == Reason::kSignal ? "the signal" : "SIGTERM"));
  }
}

int Supervisor::poll_timeout() const {
  auto next = Clock::time_point::max();
  if (reason_ == Reason::kNone) next = std::min(next, job_deadline_);
  if (kill_deadline_ && !killed_) next = std::min(next, *kill_deadline_);
  if (drain_deadline_) next = std::min(next, *drain_deadline_);
  if (linger_deadline_ && !waiting_done_)
    next = std::min(next, *linger_deadline_);
  return next == Clock::time_point::max() ? -1 : millis_until(next);
}

void Supervisor::loop() {
  std::vector<pollfd> fds;
  std::vector<OutputStream*> streams;
  for (;;) {
    if (!local_done_ && running() == 0) {
      if (!drain_deadline_) drain_deadline_ = Clock::now() + kDrainAfterExit;
      if (!streams_open() || Clock::now() >= *drain_deadline_) {
        close_streams();
        drain_deadline_.reset();
        local_done_ = true;
        if (cluster_) {
          cluster_->report_finished();
          if (options_.node_rank == 0 && !waiting_done_ && options_.verbose) {
            say("waiting for the other nodes to finish");
          }
          linger_deadline_ = Clock::now() + kLingerForLateNodes;
          on_cluster();  // news that came while ranks ran is not repeated
        }
      }
    }
    if (local_done_ &&
        (!cluster_ || options_.node_rank != 0 || waiting_done_)) {
      return;
    }

    fds.clear();
    streams.clear();
    fds.push_back({signals_.fd(), POLLIN, 0});
    if (cluster_) fds.push_back({cluster_->event_fd(), POLLIN, 0});
    const size_t first_stream = fds.size();
    for (Rank& r : ranks_) {
      for (OutputStream* s : {r.out.get(), r.err.get()}) {
        if (!s->open()) continue;
        fds.push_back({s->fd(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    const int n = ::poll(fds.data(), fds.size(), poll_timeout());
    if (n < 0 && errno != EINTR) {
      throw LaunchError("poll: " + errno_text(errno));
    }
    if (n > 0) {
      for (size_t i = first_stream; i < fds.size(); ++i) {
        if (fds[i].revents != 0) streams[i - first_stream]->pump();
      }
      if (fds[0].revents != 0) {
        bool child = false;
        for (const int sig : signals_.drain()) {
          if (sig == SIGCHLD) {
            child = true;
          } else {
            on_signal(sig);
          }
        }
        if (child) reap();
      }
      if (cluster_ && fds[1].revents != 0) on_cluster();
    }
    check_deadlines();
  }
}

}  // namespace gang::launcher
