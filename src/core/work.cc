#include "core/work.h"

namespace gang::core {

Work::Work(Clock::time_point deadline,
           std::function<void(const std::string&)> on_overdue, const char* api,
           uint64_t id, std::string gang_name)
    : deadline_(deadline),
      on_overdue_(std::move(on_overdue)),
      api_(api),
      id_(id),
      gang_name_(std::move(gang_name)) {}

void Work::complete(Status status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    status_ = status;
    message_ = message;
  }
  cv_.notify_all();
}

Status Work::test(std::string* message) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return Status::kInProgress;
  if (message) *message = message_;
  return status_;
}

Status Work::wait(Millis timeout, std::string* message) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return done_; };
  if (timeout.count() >= 0) {
    if (!cv_.wait_until(lock, deadline_after(timeout), done)) {
      return Status::kInProgress;
    }
  } else if (!cv_.wait_until(lock, deadline_ + kGrace, done)) {
    // The backend should have ended the operation at its deadline; it did
    // not, so fail the gang (which aborts the backend) and say so.
    const std::string why =
        str_cat(api_, " (operation ", id_, ") on gang \"", gang_name_,
                "\" did not finish by its deadline");
    auto overdue = std::move(on_overdue_);
    on_overdue_ = nullptr;
    lock.unlock();
    if (overdue) overdue(why);
    complete(Status::kTimeout, why);
    lock.lock();
  }
  if (message) *message = message_;
  return status_;
}

}  // namespace gang::core
