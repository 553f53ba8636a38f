#include "callbacks.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace gang_torch {
namespace {

// Threads that have had nothing to do for this long end.
constexpr auto kIdle = std::chrono::seconds(20);

class Pool {
 public:
  void post(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
    if (queue_.size() > idle_) {
      std::thread([this] { run(); }).detach();
    } else {
      wake_.notify_one();
    }
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (queue_.empty()) {
        ++idle_;
        bool woke = wake_.wait_for(lock, kIdle, [this] { return !queue_.empty(); });
        --idle_;
        if (!woke) return;
      }
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  size_t idle_ = 0;
};

// Never destroyed: its threads may outlive static destruction at exit.
Pool& pool() {
  static Pool* instance = new Pool();
  return *instance;
}

}  // namespace

void run_callback(std::function<void()> fn) { pool().post(std::move(fn)); }

}  // namespace gang_torch
