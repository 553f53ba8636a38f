#include "core/work.h"

#include <algorithm>
#include <new>

#include "core/flight_recorder.h"
#include "core/gang.h"

namespace gang::core {

Work::Work(std::weak_ptr<Gang> gang, std::shared_ptr<FlightRecorder> recorder,
           const char* api, uint64_t id, Clock::time_point deadline,
           int feeders)
    : gang_(std::move(gang)),
      recorder_(std::move(recorder)),
      api_(api),
      id_(id),
      deadline_(deadline),
      feeders_(feeders) {}

Work::~Work() = default;

void Work::finish_locked(Status status, const std::string& message) {
  if (done_) return;
  done_ = true;
  status_ = status;
  message_ = message;
  if (recorder_) recorder_->ended(id_, status);
  cv_.notify_all();
}

void Work::complete(Status status, const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  finish_locked(status, message);
}

void Work::posted(BackendWorkPtr pending) {
  std::lock_guard<std::mutex> lock(mu_);
  --feeders_;
  if (pending) pending_.push_back(std::move(pending));
  if (feeders_ == 0 && pending_.empty() && !driving_) {
    finish_locked(Status::kOk, "");
  }
  cv_.notify_all();
}

void Work::failed(Status status, const std::string& what) {
  Status final_status = status;
  std::string message = str_cat(api_, " (operation ", id_, "): ", what);
  if (auto g = gang_.lock()) {
    message = g->report_failure(api_, id_, &final_status, what);
  }
  std::lock_guard<std::mutex> lock(mu_);
  --feeders_;
  finish_locked(final_status, message);
}

void Work::drive(std::unique_lock<std::mutex>& lock, bool blocking,
                 Clock::time_point until) {
  driving_ = true;
  std::vector<BackendWorkPtr> mine;
  mine.swap(pending_);
  lock.unlock();
  Status error = Status::kOk;
  std::string what;
  size_t ended = 0;
  try {
    for (; ended < mine.size(); ++ended) {
      const bool done =
          blocking ? mine[ended]->wait(until) : mine[ended]->test();
      if (!done) break;
    }
  } catch (const Error& e) {
    error = e.status();
    what = e.what();
  } catch (const std::bad_alloc&) {
    error = Status::kNoMemory;
    what = "out of memory";
  } catch (const std::exception& e) {
    error = Status::kInternal;
    what = e.what();
  }
  if (error != Status::kOk) {
    std::string message = str_cat(api_, " (operation ", id_, "): ", what);
    Status final_status = error;
    if (auto g = gang_.lock()) {
      message = g->report_failure(api_, id_, &final_status, what);
    }
    lock.lock();
    driving_ = false;
    finish_locked(final_status, message);
    cv_.notify_all();
    return;
  }
  lock.lock();
  driving_ = false;
  // What did not end goes back, ahead of parts posted meanwhile.
  if (ended < mine.size()) {
    std::move(mine.begin() + static_cast<std::ptrdiff_t>(ended), mine.end(),
              std::back_inserter(pending_));
  }
  if (feeders_ == 0 && pending_.empty()) finish_locked(Status::kOk, "");
  cv_.notify_all();
}

void Work::check_overdue(std::unique_lock<std::mutex>& lock) {
  if (done_ || Clock::now() < deadline_ + kGrace) return;
  // The backend should have ended the operation at its deadline; it did
  // not, so fail the gang (which aborts the backend) and say so.
  const std::string why =
      str_cat(api_, " (operation ", id_, ") did not finish by its deadline");
  lock.unlock();
  std::string message = why;
  if (auto g = gang_.lock()) message = g->overdue(why);
  lock.lock();
  finish_locked(Status::kTimeout, message);
}

Status Work::wait(Millis timeout, std::string* message) {
  const Clock::time_point hard = deadline_ + kGrace;
  const Clock::time_point until =
      timeout.count() < 0 ? hard : std::min(deadline_after(timeout), hard);
  std::unique_lock<std::mutex> lock(mu_);
  bool drove = false;
  while (!done_) {
    const bool expired = Clock::now() >= until;
    // Drive at least once (a wait of 0 makes progress too), and again only
    // while time is left: a backend work still running at `until` returns
    // at once from then on, and re-driving it would spin to the deadline.
    if (!pending_.empty() && !driving_ && !(drove && expired)) {
      drive(lock, true, until);
      drove = true;
      continue;
    }
    if (expired) {
      check_overdue(lock);
      if (!done_) return Status::kInProgress;
      break;
    }
    cv_.wait_until(lock, until);
  }
  if (message) *message = message_;
  return status_;
}

bool Work::ended() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

Status Work::test(std::string* message) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_ && !pending_.empty() && !driving_) {
    drive(lock, false, Clock::time_point{});
  }
  if (!done_) check_overdue(lock);
  if (!done_) return Status::kInProgress;
  if (message) *message = message_;
  return status_;
}

}  // namespace gang::core
