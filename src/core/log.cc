#include "core/log.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "store/store_options.h"

namespace gang::core {

bool log_enabled(env::LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(env::log_level());
}

void log_line(env::LogLevel level, const std::string& line) {
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  // One fprintf per line keeps lines of concurrent ranks from interleaving.
  std::fprintf(stderr, "gang[%d] %s: %s\n", static_cast<int>(getpid()),
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
