// The supervisor: starts the local ranks, forwards their output, forwards
// signals to them, and stops them all when one fails, the job times out,
// gangrun is interrupted or another node aborts. With --replace-failed, a
// failed rank is replaced by a joiner (replacement.h) while any are left.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster.h"
#include "launcher/options.h"
#include "launcher/output.h"
#include "launcher/platform.h"
#include "launcher/process.h"
#include "launcher/replacement.h"
#include "launcher/signals.h"

namespace gang::launcher {

class Supervisor {
 public:
  // cluster: nullptr for a one-node job. job_deadline: when --timeout ends
  // the job (Clock::time_point::max() for never).
  // flight_recorder: the ranks' GANG_FLIGHT_RECORDER ("" for none), whose
  // directory gangrun names when it asks for dumps (SIGUSR2) and when a
  // rank fails. replacer: starts replacements for failed ranks (nullptr:
  // none, the first failure stops the job).
  Supervisor(const Options& o, SignalFd& signals, Cluster* cluster,
             Clock::time_point job_deadline, std::string flight_recorder,
             Replacer* replacer = nullptr);

  // Runs specs[i] as local rank i until every rank has ended (and, on node 0
  // of a multi-node job, every other node has finished). Returns gangrun's
  // exit status.
  int run(const std::vector<SpawnSpec>& specs);

  // The signal that stopped the job, or 0: gangrun then dies by it too, so
  // a calling shell script stops as well.
  int stop_signal() const {
    return reason_ == Reason::kSignal ? exit_code_ - 128 : 0;
  }

 private:
  enum class Reason { kNone, kFailure, kRemote, kTimeout, kSignal, kSetup };

  struct Rank {
    int rank = 0;  // global; a replacement's: the launch rank it replaces
    int local_rank = 0;
    int join = 0;  // 0: a launch rank; K: replacement K ("join K")
    Child child;
    std::unique_ptr<OutputStream> out;
    std::unique_ptr<OutputStream> err;
  };

  void spawn_all(const std::vector<SpawnSpec>& specs);
  // Starts one process and forwards its output (throws LaunchError).
  void spawn(const SpawnSpec& spec, int rank, int local_rank, int join);
  // "rank R" or "join K".
  static std::string label(const Rank& r);
  // Starts a replacement for ranks_[i], which failed: `line` says how.
  void replace(size_t i, const std::string& line);
  void loop();
  int poll_timeout() const;
  void on_signal(int sig);
  // SIGUSR2: every running rank gets SIGURG and dumps its flight recorder.
  void ask_for_dumps();
  // "; read them with gang-trace DIR" when the ranks' dumps are there.
  std::string trace_hint() const;
  void on_cluster();
  void check_waiting();
  void reap();
  void check_deadlines();
  // Starts stopping the ranks with `sig` for `reason`, printing message;
  // false if already stopping. Other nodes are told for_other_nodes (by
  // default "node K: <message>").
  bool begin_stop(Reason reason, int exit_code, const std::string& message,
                  int sig, const std::string& for_other_nodes = "");
  void kill_all(const std::string& why);
  size_t running() const;
  bool streams_open() const;
  void close_streams();
  void say(const std::string& line);

  const Options& options_;
  SignalFd& signals_;
  Cluster* cluster_;
  const Clock::time_point job_deadline_;
  Replacer* replacer_;

  Sink stdout_{1};
  Sink stderr_{2};
  std::vector<Rank> ranks_;
  std::string flight_dir_;  // the directory of the ranks' dumps, or ""

  Reason reason_ = Reason::kNone;
  int exit_code_ = 0;
  std::optional<Clock::time_point> kill_deadline_;
  bool killed_ = false;
  std::optional<Clock::time_point> drain_deadline_;
  bool local_done_ = false;
  bool waiting_done_ = false;  // node 0: done waiting for the other nodes
  ClusterState cluster_state_;
  std::optional<Clock::time_point> linger_deadline_;
};

}  // namespace gang::launcher
