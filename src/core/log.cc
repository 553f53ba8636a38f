#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "base/text.h"
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
  // Local wall-clock time, so lines of several ranks (and of other tools)
  // can be put side by side.
  const std::string when = base::local_time_text();
  const int rank = g_log_rank.load(std::memory_order_relaxed);
  char who[48];
  if (rank >= 0) {
    std::snprintf(who, sizeof who, "rank %d pid %d", rank, static_cast<int>(getpid()));
  } else {
    std::snprintf(who, sizeof who, "pid %d", static_cast<int>(getpid()));
  }
  // One fprintf per line keeps lines of concurrent ranks from interleaving.
  std::fprintf(stderr, "%s gang[%s] %s: %s\n", when.c_str(), who,
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
