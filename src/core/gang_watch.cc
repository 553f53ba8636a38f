// The watcher of a gang with a notice board (a device gang, whose control
// channel is its own). Every rank fails fast, not only the one that saw the
// error: the watcher polls the backend's own errors often (they are local
// and cheap) and the peers' notices on the board less often (a store round
// trip), and fails the gang on either. Failing posts this rank's notice for
// the others (Gang::mark_failed); a failure learnt from a peer is not posted
// again.
#include "core/control_channel.h"
#include "core/gang.h"

namespace gang::core {

namespace {
constexpr Millis kBackendPoll{10};
constexpr Millis kBoardPoll{100};
}  // namespace

void Gang::start_watch() {
  watcher_ = std::thread([this] { watch(); });
}

void Gang::stop_watch() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  watcher_.join();
}

void Gang::watch() {
  Clock::time_point next_board_look = Clock::now();
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_stop_) {
    watch_cv_.wait_for(lock, kBackendPoll);
    if (watch_stop_) break;
    if (failed_.load() != 0) {
      // Nothing left to watch for.
      watch_cv_.wait(lock, [&] { return watch_stop_; });
      break;
    }
    lock.unlock();
    async_error();  // fails the gang on the backend's own error
    if (failed_.load() == 0 && Clock::now() >= next_board_look) {
      next_board_look = Clock::now() + kBoardPoll;
      std::string said;
      if (control_->peer_failure(&said)) {
        mark_failed(Status::kPeerLost,
                    str_cat("gang \"", name_, "\" rank ", rank_,
                            ": another rank failed: ", said),
                    /*from_peer=*/true);
      }
    }
    lock.lock();
  }
}

}  // namespace gang::core
