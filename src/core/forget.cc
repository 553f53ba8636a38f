#include "core/forget.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

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
  // The parent's, copied into the child with the keys it had not yet
  // forgotten, is the parent's work: the child leaves it alone (its lock
  // may be held, and touching its stores would act for the parent) and
  // keeps it reachable, as memory it inherited rather than lost.
  static Forgetter& get() {
    static std::mutex made_mu;
    static Forgetter* made = nullptr;
    static std::vector<Forgetter*>* inherited = nullptr;
    std::lock_guard<std::mutex> lock(made_mu);
    if (made != nullptr && made->pid_ != ::getpid()) {
      if (inherited == nullptr) inherited = new std::vector<Forgetter*>();
      inherited->push_back(made);
      made = nullptr;
    }
    if (made == nullptr) {
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

  // The job in hand stays at the front of the queue until it is done, so
  // that what it holds stays reachable from this object: a child forked
  // meanwhile has no copy of this thread (nor of its stack), only of the
  // queue. One thread takes jobs, and a deque's push_back leaves its other
  // elements where they are.
  void loop() {
    for (;;) {
      const Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = &jobs_.front();
      }
      run(*job);
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.pop_front();
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
