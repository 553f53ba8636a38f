// The C++ core's error mechanism: gang::Error carries a status and a message.
// The C shim turns it into a gang_status_t and the thread's last error.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace gang {

// Mirrors gang_status_t; the shim translates it through a table.
enum class Status : int {
  kOk = 0,
  kInProgress = 1,
  kInvalidArgument = -1,
  kUnsupported = -2,
  kUnavailable = -3,
  kTimeout = -4,
  kPeerLost = -5,
  kMismatch = -6,
  kAborted = -7,
  kStore = -8,
  kNoMemory = -9,
  kSystem = -10,
  kInternal = -11,
};

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Concatenates its arguments with operator<<.
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Status status, Args&&... args) {
  throw Error(status, str_cat(std::forward<Args>(args)...));
}

}  // namespace gang
