// A gang with a notice board (a device gang, whose control channel is its
// own) under the process's notice watcher (notice_watcher.h). Every rank
// fails fast, not only the one that saw the error: the watcher fails the
// gang on its backend's own error or on a peer's notice. Failing posts this
// rank's notice for the others (FailureState::mark); a failure learnt from a
// peer is not posted again.
#include <algorithm>

#include "core/control_channel.h"
#include "core/failure.h"
#include "core/gang.h"
#include "core/notice_watcher.h"

namespace gang::core {

// The watcher calls these until stop_watch() returns, which shutdown() does
// before anything they touch goes: raw `this` is safe in them.
void Gang::start_watch() {
  NoticeWatch w;
  w.job = store_;
  w.job_ranks = size_;
  for (const int r : root_ranks_) w.job_ranks = std::max(w.job_ranks, r + 1);
  w.poll = [this] { return async_error() == Status::kOk; };
  w.read_board = [this](std::string* said) {
    return control_->peer_failure(said);
  };
  w.peer_failed = [this](const std::string& said) {
    failure_->mark(Status::kPeerLost,
                   str_cat("gang \"", name_, "\" rank ", rank_,
                           ": another rank failed: ", said),
                   /*from_peer=*/true);
  };
  watch_id_ = watch_notices(std::move(w));
}

void Gang::stop_watch() {
  unwatch_notices(watch_id_);
  watch_id_ = 0;
}

}  // namespace gang::core
