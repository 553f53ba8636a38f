#include "launcher/cluster.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "base/error.h"
#include "launcher/rank_env.h"

namespace gang::launcher {

namespace {

constexpr std::chrono::milliseconds kStoreTimeout(2000);
constexpr std::chrono::milliseconds kPollInterval(200);
constexpr std::chrono::seconds kLostAfter(15);

std::string text(const store::Bytes& b) {
  return std::string(b.begin(), b.end());
}
store::Bytes bytes(const std::string& s) {
  return store::Bytes(s.begin(), s.end());
}

std::string config_of(const Options& o) {
  return "nnodes=" + std::to_string(o.nnodes) +
         " nproc_per_node=" + std::to_string(o.nproc_per_node);
}

std::string node_key(const char* what, int node) {
  return std::string("gangrun/") + what + "/" + std::to_string(node);
}

}  // namespace

Cluster::Cluster(const Options& o, const std::string& store_host,
                 int store_port, int torch_port, const std::string& token,
                 Clock::time_point deadline, SignalFd& signals)
    : options_(o), token_(token), torch_port_(torch_port) {
  event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event_.valid()) throw LaunchError("eventfd: " + errno_text(errno));
  host_ = o.node_rank == 0 ? store_host : o.master_addr;
  // A bracketed IPv6 --master-addr is a host without its brackets here.
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') {
    host_ = host_.substr(1, host_.size() - 2);
  }
  port_ = o.node_rank == 0 ? store_port : o.master_port;
  url_ = tcp_url(host_, port_);
  join(deadline, signals);
  thread_ = std::thread([this] { watch(); });
}

Cluster::~Cluster() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Cluster::join(Clock::time_point deadline, SignalFd& signals) {
  const std::string config = config_of(options_);
  std::string last_error;
  for (;;) {
    try {
      auto s = store::connect_tcp(host_, port_, kStoreTimeout, token_);
      if (options_.node_rank == 0) {
        s->set("gangrun/master_port", bytes(std::to_string(torch_port_)));
        s->set("gangrun/config", bytes(config));
      } else {
        const std::string theirs = text(s->get("gangrun/config"));
        if (theirs != config) {
          throw LaunchError("node 0 runs with " + theirs +
                            " but this node with " + config +
                            "; every node must be started the same way");
        }
        torch_port_ = std::atoi(text(s->get("gangrun/master_port")).c_str());
      }
      if (s->add(node_key("node", options_.node_rank), 1) > 1) {
        throw LaunchError("another gangrun already joined this job as node " +
                          std::to_string(options_.node_rank));
      }
      store_ = std::move(s);
      return;
    } catch (const store::Denied& e) {
      // Node 0 serves with another token: waiting will not change it.
      throw LaunchError(std::string("node 0's store refused this node (every "
                                    "node needs the same GANG_STORE_TOKEN): ") +
                        e.what());
    } catch (const gang::Error& e) {
      if (e.status() != Status::kStore && e.status() != Status::kTimeout) {
        throw LaunchError(std::string("store ") + url_ + ": " + e.what());
      }
      last_error = e.what();
    }
    if (Clock::now() >= deadline) {
      throw LaunchError("cannot reach node 0's store at " + url_ + ": " +
                        last_error);
    }
    const int sig = signals.wait_terminating(std::min(
        millis_until(deadline), static_cast<int>(kPollInterval.count())));
    if (sig != 0) throw Interrupted{sig};
  }
}

ClusterState Cluster::state() {
  uint64_t count = 0;
  ssize_t ignored = ::read(event_.get(), &count, sizeof count);
  (void)ignored;
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

void Cluster::report_failure(int exit_code, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_reported_) return;
    failure_reported_ = true;
    pending_failure_ = std::to_string(exit_code) + " " + what;
  }
  cv_.notify_all();
}

void Cluster::report_finished() {
  if (options_.node_rank == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_finished_ = true;
  }
  cv_.notify_all();
}

void Cluster::notify() {
  const uint64_t one = 1;
  ssize_t ignored = ::write(event_.get(), &one, sizeof one);
  (void)ignored;
}

void Cluster::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::optional<std::string> failure = std::move(pending_failure_);
    pending_failure_.reset();
    const bool finished = std::exchange(pending_finished_, false);
    const bool stop = stop_;
    lock.unlock();
    try {
      if (failure) {
        if (store_->add("gangrun/abort", 1) == 1) {
          store_->set("gangrun/abort_info", bytes(*failure));
        }
      }
      if (finished) {
        store_->add(node_key("finished", options_.node_rank), 1);
        store_->add("gangrun/finished", 1);
      }
      if (stop) return;
      poll_once();
    } catch (const std::exception& e) {
      lock.lock();
      state_.store_lost = true;
      state_.store_error = e.what();
      lock.unlock();
      notify();
      return;
    }
    lock.lock();
    cv_.wait_for(lock, kPollInterval, [this] {
      return stop_ || pending_failure_ || pending_finished_;
    });
  }
}

void Cluster::poll_once() {
  const int self = options_.node_rank;
  if (self != 0) store_->add(node_key("alive", self), 1);

  bool news = false;
  bool self_failed;
  bool seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    self_failed = failure_reported_;
    seen = state_.remote_failure;
  }
  if (!self_failed && !seen && store_->add("gangrun/abort", 0) > 0) {
    const std::string info = text(store_->get("gangrun/abort_info"));
    const size_t space = info.find(' ');
    std::lock_guard<std::mutex> lock(mu_);
    state_.remote_failure = true;
    state_.remote_exit_code = std::atoi(info.substr(0, space).c_str());
    state_.remote_what =
        space == std::string::npos ? "another node" : info.substr(space + 1);
    news = true;
  }

  if (self == 0 && options_.nnodes > 1) {
    const bool all = store_->add("gangrun/finished", 0) >= options_.nnodes - 1;
    const auto now = Clock::now();
    std::vector<int> lost;
    bool joined_finished = true;
    for (int k = 1; k < options_.nnodes && !all; ++k) {
      if (store_->add(node_key("finished", k), 0) > 0) continue;
      if (store_->add(node_key("node", k), 0) > 0) joined_finished = false;
      const int64_t beats = store_->add(node_key("alive", k), 0);
      auto it = heartbeats_.find(k);
      if (it == heartbeats_.end() || it->second.first != beats) {
        heartbeats_[k] = {beats, now};
      } else if (now - it->second.second > kLostAfter) {
        lost.push_back(k);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (all && !state_.all_finished) {
      state_.all_finished = true;
      news = true;
    }
    if (joined_finished != state_.joined_finished ||
        lost != state_.lost_nodes) {
      state_.joined_finished = joined_finished;
      state_.lost_nodes = lost;
      news = true;
    }
  }
  if (news) notify();
}

}  // namespace gang::launcher
