#include "core/forget.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "store/store.h"

namespace gang::core {

namespace {

struct Job {
  std::shared_ptr<store::Store> store;
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, std::string>> counted;
};

void run(const Job& job) noexcept {
  try {
    for (const std::string& k : job.keys) job.store->remove(k);
    for (const auto& [counter, item] : job.counted) {
      const int64_t n = job.store->add(counter, 0);
      for (int64_t i = 1; i <= n; ++i) job.store->remove(str_cat(item, i));
      job.store->remove(counter);
    }
  } catch (...) {
    // The store is slow or gone: what is left stays.
  }
}

// One thread of the process forgets, in the order asked, for as long as
// the process lives: membership changes and creations ask often, and a
// thread each would come and go with every one.
class Forgetter {
 public:
  // This process's, made on first use. A child of fork() gets one of its
  // own: the parent's thread is not in it, and its lock may have been held
  // at the fork.
  static Forgetter& get() {
    static std::mutex made_mu;
    static Forgetter* made = nullptr;
    std::lock_guard<std::mutex> lock(made_mu);
    if (made == nullptr || made->pid_ != ::getpid()) {
      made = new Forgetter();  // never destroyed: its thread may outlive statics
    }
    return *made;
  }

  // False when no thread could be started (the keys then stay).
  bool add(Job job) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (...) {
        return false;
      }
      started_ = true;
    }
    jobs_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }

 private:
  Forgetter() : pid_(::getpid()) {}

  void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      run(job);
    }
  }

  const pid_t pid_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool started_ = false;
};

}  // namespace

void forget(std::shared_ptr<store::Store> store, std::vector<std::string> keys,
            std::vector<std::pair<std::string, std::string>> counted) {
  if (!store) return;
  try {
    Forgetter::get().add(Job{std::move(store), std::move(keys), std::move(counted)});
  } catch (...) {
    // No memory for the job: the keys stay.
  }
}

}  // namespace gang::core
