#include "core/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "store/store_options.h"

namespace gang::core {

namespace {

std::atomic<int> g_log_rank{-1};

}  // namespace

void set_log_rank(int rank) { g_log_rank.store(rank, std::memory_order_relaxed); }

bool log_enabled(env::LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(env::log_level());
}

void log_line(env::LogLevel level, const std::string& line) {
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  // Local wall-clock time to the millisecond, so lines of several ranks
  // (and of other tools) can be put side by side.
  timeval tv;
  ::gettimeofday(&tv, nullptr);
  tm local;
  ::localtime_r(&tv.tv_sec, &local);
  char when[32];
  const size_t n = std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &local);
  std::snprintf(when + n, sizeof when - n, ".%03d", static_cast<int>(tv.tv_usec / 1000));
  const int rank = g_log_rank.load(std::memory_order_relaxed);
  char who[48];
  if (rank >= 0) {
    std::snprintf(who, sizeof who, "rank %d pid %d", rank, static_cast<int>(getpid()));
  } else {
    std::snprintf(who, sizeof who, "pid %d", static_cast<int>(getpid()));
  }
  // One fprintf per line keeps lines of concurrent ranks from interleaving.
  std::fprintf(stderr, "%s gang[%s] %s: %s\n", when, who,
               kNames[static_cast<int>(level)], line.c_str());
}

void route_store_server_log() {
  static std::once_flag once;
  std::call_once(once, [] {
    store::set_server_log([](const std::string& line) {
      GANG_LOG(kWarn, "store server: ", line);
    });
  });
}

}  // namespace gang::core
