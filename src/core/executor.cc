#include "core/executor.h"

#include "base/error.h"

namespace gang::core {

Executor::Executor(std::function<void(Task&)> post) : post_(std::move(post)) {}

Executor::~Executor() { stop(Millis(0)); }

bool Executor::enter_here() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) fail(Status::kAborted, "the gang is being destroyed");
  if (busy_ || !queue_.empty()) return false;
  busy_ = true;
  return true;
}

void Executor::leave_here() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  cv_.notify_all();
}

void Executor::submit(std::shared_ptr<Task> task, bool async) {
  if (!async && run_here([&] { post_(*task); })) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) {
    fail(Status::kAborted, "the gang is being destroyed");
  }
  queue_.push_back(std::move(task));
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  cv_.notify_all();
}

void Executor::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] {
      return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty());
    });
    if (queue_.empty()) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    post_(*task);
    task.reset();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

bool Executor::wait_idle(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, until,
                        [this] { return !busy_ && queue_.empty(); });
}

void Executor::stop(Millis grace) {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  lock.unlock();
  if (worker_.joinable()) worker_.join();
  lock.lock();
  cv_.wait_for(lock, grace, [this] { return !busy_; });
}

}  // namespace gang::core
