// The one place that reads GANG_* environment variables. Values are read at
// each call, so a program (or a test) may change them between gang_create
// calls.
#pragma once

#include <chrono>
#include <string>

namespace gang::core::env {

constexpr std::chrono::milliseconds kDefaultTimeout{600000};

// GANG_TIMEOUT_MS if set (a positive integer, else kInvalidArgument naming
// it), otherwise kDefaultTimeout.
std::chrono::milliseconds timeout();

// GANG_SOCKET_IFNAME, or "".
std::string socket_ifname();

// GANG_INIT_METHOD, or "".
std::string init_method();

// GANG_RANK / GANG_SIZE as a pair; both -1 when neither is set. One without
// the other, or a malformed value, is kInvalidArgument naming the variable.
struct RankSize {
  int rank = -1;
  int size = -1;
};
RankSize rank_size();

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };
// GANG_LOG_LEVEL (error|warn|info|debug); warn when unset or unknown.
LogLevel log_level();

}  // namespace gang::core::env
