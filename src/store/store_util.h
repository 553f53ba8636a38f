// Helpers shared by the store implementations: deadlines, error text and the
// decimal counters behind add().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "store/store.h"

namespace gang::store::detail {

using Clock = std::chrono::steady_clock;

// A point in time every step of one call counts down to, so a call that
// waits several times (connect, send, receive; several keys) still ends
// within one timeout.
constexpr int64_t kCenturyMs = 100LL * 365 * 24 * 3600 * 1000;

class Deadline {
 public:
  // Timeouts beyond a century are a century: adding INT64_MAX ms to the
  // clock would overflow its nanoseconds.
  explicit Deadline(Millis timeout)
      : end_(Clock::now() + std::min(timeout, Millis(kCenturyMs))) {}
  bool expired() const { return Clock::now() >= end_; }
  Clock::time_point end() const { return end_; }
  Clock::duration remaining() const;
  // Milliseconds left for poll(), rounded up so poll() never returns before
  // the deadline and makes its caller spin; 0 once expired.
  int poll_ms() const;

 private:
  Clock::time_point end_;
};

// The key in double quotes for messages, non-printable bytes escaped and a
// long key shortened, so a 4 KiB binary key cannot swamp a message.
std::string quote(const std::string& key);

// strerror(err), thread-safe.
std::string errno_text(int err);

// The value add() stores: `current` (nullptr: the key is missing, read as 0)
// parsed as a decimal int64, plus delta. Throws kInvalidArgument when the
// value is not a decimal integer or the sum overflows.
int64_t add_decimal(const std::string& key, const Bytes* current,
                    int64_t delta);
Bytes decimal_bytes(int64_t value);

// kTimeout for get/wait, whose key never appeared.
[[noreturn]] void fail_missing(const char* op, const std::string& key,
                               Millis timeout);

}  // namespace gang::store::detail
