#include "core/notice_watcher.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/control_channel.h"
#include "core/log.h"

namespace gang::core {

namespace {

// The backends' own errors: local, so looked at often.
constexpr Millis kBackendPoll{10};
// The job's count of posted failures, a store round trip per store, is
// read less often: every notice_look_interval (notice_watcher.h); a peer's
// failure reaches every rank within about that.

struct Entry {
  uint64_t id = 0;
  // The store the count is read from, for grouping only: never followed
  // (the store itself is reached through w.job, under `use`).
  const void* job = nullptr;
  int job_ranks = 1;  // w.job_ranks, read without `use`
  // Held while the watcher calls the gang's functions; unwatch takes it to
  // say the gang is gone, after which they are never called again.
  std::mutex use;
  NoticeWatch w;      // under use; cleared when gone
  bool gone = false;  // under use
  // The watcher thread's own.
  bool failed = false;
  std::string seen;  // the count the board was last read at ("": never)
};

class NoticeWatcher {
 public:
  // A child forked from a process with a watcher has none (only the forking
  // thread survives a fork): it makes its own for the gangs it creates,
  // leaving the parent's copy, whose locks may be held, alone.
  static NoticeWatcher& get() {
    static const bool hooked = [] {
      ::pthread_atfork(nullptr, nullptr,
                       [] { g_watcher.store(nullptr); });
      return true;
    }();
    (void)hooked;
    NoticeWatcher* w = g_watcher.load();
    if (w != nullptr) return *w;
    // Never destroyed: the thread may outlive static destruction.
    auto* fresh = new NoticeWatcher();
    if (g_watcher.compare_exchange_strong(w, fresh)) return *fresh;
    delete fresh;  // another thread made it first
    return *w;
  }

  uint64_t add(NoticeWatch w) {
    auto e = std::make_shared<Entry>();
    e->job = w.job.get();
    e->job_ranks = w.job_ranks;
    e->w = std::move(w);
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) {
      // First, so that a gang is never left behind when it throws.
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    e->id = next_id_++;
    entries_.push_back(e);
    cv_.notify_all();
    return e->id;
  }

  void remove(uint64_t id) {
    std::shared_ptr<Entry> e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if ((*it)->id == id) {
          e = std::move(*it);
          entries_.erase(it);
          break;
        }
      }
    }
    if (!e) return;
    NoticeWatch gone;
    {
      std::lock_guard<std::mutex> use(e->use);
      e->gone = true;
      gone = std::move(e->w);
    }
    // `gone` (the gang's functions and its hold on the store) ends here, on
    // the caller's thread, not on the watcher's.
  }

 private:
  NoticeWatcher() = default;

  void run() {
    Clock::time_point next_look = Clock::now();
    for (;;) {
      std::vector<std::shared_ptr<Entry>> live;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !entries_.empty(); });
        live = entries_;
      }
      for (const auto& e : live) poll(*e);
      if (Clock::now() >= next_look) {
        // The widest job this process watches sets the pace for all.
        int widest = 1;
        for (const auto& e : live) widest = std::max(widest, e->job_ranks);
        const Millis every = notice_look_interval(widest);
        next_look = Clock::now() + every;
        look(live);
      }
      std::this_thread::sleep_for(kBackendPoll);
    }
  }

  static void poll(Entry& e) {
    if (e.failed) return;
    std::lock_guard<std::mutex> use(e.use);
    if (e.gone) return;
    try {
      e.failed = !e.w.poll();
    } catch (...) {
      // Nothing to learn this time; the gang's own calls report its errors.
    }
  }

  // One read of the count per store; a gang's board only when the count
  // moved since its last read (or was never read: a gang that joins late
  // reads its board once, in case a peer failed before it was watched).
  void look(const std::vector<std::shared_ptr<Entry>>& live) {
    std::vector<bool> done(live.size(), false);
    for (size_t i = 0; i < live.size(); ++i) {
      if (done[i]) continue;
      std::vector<Entry*> group;
      for (size_t j = i; j < live.size(); ++j) {
        if (!done[j] && live[j]->job == live[i]->job) {
          done[j] = true;
          if (!live[j]->failed) group.push_back(live[j].get());
        }
      }
      std::string count;
      if (group.empty() || !read_count(group, &count)) continue;
      for (Entry* e : group) {
        if (e->seen == count) continue;
        std::lock_guard<std::mutex> use(e->use);
        if (e->gone) continue;
        e->seen = count;
        try {
          std::string said;
          if (e->w.read_board(&said)) {
            e->w.peer_failed(said);
            e->failed = true;
          }
        } catch (...) {
          // As in poll().
        }
      }
    }
  }

  // Through the first gang of the group still watched, which holds the
  // store for as long as the read takes.
  static bool read_count(const std::vector<Entry*>& group, std::string* count) {
    for (Entry* e : group) {
      std::lock_guard<std::mutex> use(e->use);
      if (e->gone) continue;
      return ControlChannel::failures_posted(*e->w.job, count);
    }
    return false;
  }

  static std::atomic<NoticeWatcher*> g_watcher;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Entry>> entries_;  // under mu_
  uint64_t next_id_ = 1;                         // under mu_
  bool started_ = false;                         // under mu_
};

std::atomic<NoticeWatcher*> NoticeWatcher::g_watcher{nullptr};

}  // namespace

uint64_t watch_notices(NoticeWatch w) {
  return NoticeWatcher::get().add(std::move(w));
}

void unwatch_notices(uint64_t id) {
  if (id != 0) NoticeWatcher::get().remove(id);
}

}  // namespace gang::core
