// Coordination between the gangruns of a multi-node job, through gang's TCP
// store that node 0 hosts (keys under "gangrun/"):
//
//   gangrun/config          node 0: "nnodes=M nproc_per_node=N"; the others
//                           check they were started the same way
//   gangrun/master_port     node 0: the MASTER_PORT every rank gets
//   gangrun/node/K          each node adds 1 on joining (a duplicate
//                           --node-rank sees 2)
//   gangrun/alive/K         nodes K > 0 add 1 every 200 ms (heartbeat)
//   gangrun/abort           a node whose rank failed (or that was
//                           interrupted or timed out) adds 1; the first
//                           also sets gangrun/abort_info = "<code> <what>"
//   gangrun/finished[/K]    nodes K > 0 add 1 when their ranks have ended
//
// Every node stops its ranks when another node aborts, and exits with that
// node's status. Node 0 keeps serving the store until every other node has
// finished (or fell silent for 15 s), so late ranks still reach it; when
// the job aborts, only for the nodes that joined.
//
// All store traffic after joining runs on a thread of its own, so the
// supervisor's loop never blocks on the network.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/options.h"
#include "launcher/platform.h"
#include "launcher/signals.h"
#include "store/store.h"
#include "base/unique_fd.h"

namespace gang::launcher {

// A terminating signal arrived while gangrun waited for node 0.
struct Interrupted {
  int sig;
};

struct ClusterState {
  bool remote_failure = false;
  int remote_exit_code = 0;
  std::string remote_what;  // "rank 3 (pid 55) on node 1 exited with status 3"
  bool all_finished = false;     // node 0: every other node finished
  bool joined_finished = false;  // node 0: every other node that joined
                                 // has finished (enough when the job aborts)
  std::vector<int> lost_nodes;   // node 0: unfinished, silent for too long
  bool store_lost = false;       // the store cannot be reached any more
  std::string store_error;
};

class Cluster {
 public:
  // Node 0 publishes the job through its own server (at store_host:
  // store_port); node K connects to node 0's store (at --master-addr and
  // --master-port), retrying until `deadline`, checks that the job matches
  // and reads the MASTER_PORT. Every node presents `token` ("": none).
  // Throws LaunchError, or Interrupted when a terminating signal arrives
  // meanwhile.
  Cluster(const Options& o, const std::string& store_host, int store_port,
          int torch_port, const std::string& token, Clock::time_point deadline,
          SignalFd& signals);
  // Sends what is still to be reported, then stops the thread.
  ~Cluster();

  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int torch_port() const { return torch_port_; }
  // Readable when state() has news.
  int event_fd() const { return event_.get(); }
  ClusterState state();

  // Tells the other nodes to stop (once; later calls are ignored).
  void report_failure(int exit_code, const std::string& what);
  // Tells node 0 this node's ranks have ended (nodes > 0).
  void report_finished();

 private:
  void join(Clock::time_point deadline, SignalFd& signals);
  void watch();
  void poll_once();
  void notify();

  const Options options_;
  std::string host_;
  int port_ = 0;
  std::string token_;
  std::string url_;  // for messages
  int torch_port_ = 0;
  std::shared_ptr<store::Store> store_;
  base::UniqueFd event_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::optional<std::string> pending_failure_;  // "<code> <what>"
  bool failure_reported_ = false;
  bool pending_finished_ = false;
  ClusterState state_;

  // Node 0's view of the others' heartbeats (watcher thread only).
  std::map<int, std::pair<int64_t, Clock::time_point>> heartbeats_;

  std::thread thread_;
};

}  // namespace gang::launcher
