// Logging to stderr, filtered by GANG_LOG_LEVEL. Each line carries the local
// time to the millisecond, the process's rank in its first gang (once it has
// one) and its pid:
//   2026-11-24T10:02:03.417 gang[rank 3 pid 4711] warn: gang "root" rank 3 ...
// Lines about a gang name it and the rank in it.
#pragma once

#include "core/env.h"
#include "base/error.h"

namespace gang::core {

bool log_enabled(env::LogLevel level);
// The rank the log lines show: the first gang_create's (a root gang).
void set_log_rank(int rank);
void log_line(env::LogLevel level, const std::string& line);

// Sends what the store servers the library starts have to say (refused
// connections, limits reached, a server other machines reach without a
// token) to this log as warnings, from now on. Idempotent; called before
// the library starts a server (gang_create, gang_store_create).
void route_store_server_log();

}  // namespace gang::core

#define GANG_LOG(level, ...)                                             \
  do {                                                                   \
    if (::gang::core::log_enabled(::gang::core::env::LogLevel::level)) { \
      ::gang::core::log_line(::gang::core::env::LogLevel::level,         \
                             ::gang::str_cat(__VA_ARGS__));              \
    }                                                                    \
  } while (0)
