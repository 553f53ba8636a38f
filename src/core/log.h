// Logging to stderr, filtered by GANG_LOG_LEVEL.
#pragma once

#include "core/env.h"
#include "base/error.h"

namespace gang::core {

bool log_enabled(env::LogLevel level);
void log_line(env::LogLevel level, const std::string& line);

}  // namespace gang::core

#define GANG_LOG(level, ...)                                             \
  do {                                                                   \
    if (::gang::core::log_enabled(::gang::core::env::LogLevel::level)) { \
      ::gang::core::log_line(::gang::core::env::LogLevel::level,         \
                             ::gang::str_cat(__VA_ARGS__));              \
    }                                                                    \
  } while (0)
