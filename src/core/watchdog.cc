#include "core/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/collective.h"
#include "core/env.h"
#include "core/flight_recorder.h"
#include "core/log.h"

namespace gang::core {

namespace {

// The self-pipe the SIGURG handler writes a byte to; -1 until installed.
std::atomic<int> g_dump_pipe{-1};

void on_dump_signal(int) {
  const int saved = errno;
  const int fd = g_dump_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char b = 1;
    (void)::write(fd, &b, 1);
  }
  errno = saved;
}

class Watchdog {
 public:
  static Watchdog& get() {
    // Never destroyed: the thread may outlive static destruction.
    static Watchdog* w = new Watchdog();
    return *w;
  }

  void add(const std::shared_ptr<Watched>& w) {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                  [](const std::weak_ptr<Watched>& x) {
                                    return x.expired();
                                  }),
                   watched_.end());
    watched_.push_back(w);
    if (!started_) {
      started_ = true;
      install_signal();
      std::thread([this] { run(); }).detach();
    }
  }

 private:
  void install_signal() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
    read_fd_ = fds[0];
    g_dump_pipe.store(fds[1]);
    struct sigaction old {};
    if (::sigaction(SIGURG, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO) != 0) {
      return;  // the program handles SIGURG itself
    }
    struct sigaction sa {};
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGURG, &sa, nullptr);
  }

  std::vector<std::shared_ptr<Watched>> live() {
    std::vector<std::shared_ptr<Watched>> v;
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& w : watched_) {
      if (auto s = w.lock()) v.push_back(std::move(s));
    }
    return v;
  }

  void dump_all() {
    for (const auto& w : live()) {
      if (!w->recorder) continue;
      const std::string not_written = w->recorder->dump("dump requested (SIGURG)");
      GANG_LOG(kWarn, "gang \"", w->gang, "\" rank ", w->rank, ": ",
               not_written.empty()
                   ? "recent operations written to " + w->recorder->path() + " on request"
                   : "flight recorder " + not_written);
    }
  }

  void warn_waits() {
    const auto every = env::wait_warn_interval();
    if (every.count() <= 0) return;
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    for (const auto& w : live()) {
      const uint64_t post = w->busy_post.load(std::memory_order_acquire);
      if (post == 0 || w->warns_itself) continue;
      if (post != w->seen_post) {
        w->seen_post = post;
        w->seen_since = now;
        w->warnings = 0;
      }
      const int64_t waited = now - w->seen_since;
      if (waited < (w->warnings + 1) * every.count() * 1000000) continue;
      ++w->warnings;
      GANG_LOG(kWarn, "gang \"", w->gang, "\" rank ", w->rank, " has waited ",
               waited / 1000000000, " s in ",
               op_api_name(static_cast<OpKind>(w->busy_kind.load())), " #",
               w->busy_seq.load(),
               " for its peers (gangrun: kill -USR2 <gangrun pid> dumps every "
               "rank's recent operations; gang-trace reads them)");
    }
  }

  void run() {
    for (;;) {
      pollfd p{read_fd_, POLLIN, 0};
      const int n = read_fd_ >= 0 ? ::poll(&p, 1, 1000) : (::sleep(1), 0);
      if (n > 0) {
        char buf[64];
        while (::read(read_fd_, buf, sizeof buf) > 0) {
        }
        dump_all();
      }
      warn_waits();
    }
  }

  std::mutex mu_;
  std::vector<std::weak_ptr<Watched>> watched_;
  bool started_ = false;
  int read_fd_ = -1;
};

}  // namespace

void watch_gang(const std::shared_ptr<Watched>& w) { Watchdog::get().add(w); }

}  // namespace gang::core
