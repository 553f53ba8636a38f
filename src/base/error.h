// The C++ inside's error mechanism: gang::Error carries a status and a
// message. The C shim turns it into a gang_status_t and the thread's last
// error. Every layer may throw it; it depends on nothing but the standard
// library and the public list of statuses.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "gang/gang_status.h"

namespace gang {

// The statuses of gang_status_t under C++ names, with the same values. The
// ABI maps between the two through GANG_STATUS_MAP (abi/shim.cc), and the
// assertions below keep the lists equal.
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

namespace detail {
#define GANG_STATUS_COUNT_(name, value, msg) +1
constexpr int kPublicStatuses = 0 GANG_STATUS_MAP(GANG_STATUS_COUNT_);
#undef GANG_STATUS_COUNT_
// Every public value lies in [kInternal, kInProgress], and there are as many
// public statuses as values in that range: the lists are the same.
#define GANG_STATUS_IN_RANGE_(name, value, msg)                        \
  static_assert((value) >= static_cast<int>(Status::kInternal) &&      \
                    (value) <= static_cast<int>(Status::kInProgress),  \
                "gang_status.h has a status Status does not");
GANG_STATUS_MAP(GANG_STATUS_IN_RANGE_)
#undef GANG_STATUS_IN_RANGE_
static_assert(kPublicStatuses == static_cast<int>(Status::kInProgress) -
                                     static_cast<int>(Status::kInternal) + 1,
              "Status and GANG_STATUS_MAP list different statuses");
}  // namespace detail

// "GANG_ERR_TIMEOUT", from GANG_STATUS_MAP.
const char* status_name(Status status);

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
