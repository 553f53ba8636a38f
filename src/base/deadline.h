// The one clock and deadline type of gang. A deadline is a point on the
// steady clock that every step of one operation counts down to, so a call
// that waits several times (connect, send, receive; several keys; several
// chunks) still ends within one timeout.
#pragma once

#include <chrono>
#include <cstdint>

namespace gang::base {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Timeouts beyond a century are a century: adding INT64_MAX ms to the clock
// would overflow its nanoseconds.
constexpr int64_t kCenturyMs = 100LL * 365 * 24 * 3600 * 1000;

// How close to its deadline a wait that fails counts as timed out: the
// ranks of one operation share a deadline only up to when each started
// it, so a peer that gave up at the same deadline (its wait for a rank
// that never came) reads as a timeout here too, not as a lost peer.
constexpr Millis kDeadlineSlack{50};

// Whether a wait that failed at `now` ended at its deadline.
inline bool at_deadline(Clock::time_point deadline, Clock::time_point now = Clock::now()) {
  return now >= deadline - kDeadlineSlack;
}

// now + timeout, saturating at a century.
inline Clock::time_point deadline_from(Clock::time_point now, Millis timeout) {
  return now + (timeout < Millis(kCenturyMs) ? timeout : Millis(kCenturyMs));
}
inline Clock::time_point deadline_after(Millis timeout) {
  return deadline_from(Clock::now(), timeout);
}

// Clock::now() to within the kernel's clock tick (1-4 ms), for about a
// third of its cost: CLOCK_MONOTONIC_COARSE, the clock Clock reads
// (steady_clock is CLOCK_MONOTONIC) at the last tick. For records shown
// in whole milliseconds, never for a deadline.
Clock::time_point coarse_now();

class Deadline {
 public:
  explicit Deadline(Millis timeout) : end_(deadline_after(timeout)) {}
  static Deadline at(Clock::time_point end) { return Deadline(end); }

  bool expired() const { return Clock::now() >= end_; }
  Clock::time_point end() const { return end_; }
  // Time left, zero once expired.
  Clock::duration remaining() const;
  // Whole milliseconds left, rounded up; 0 once expired.
  Millis remaining_ms() const;
  // Milliseconds left for poll(), rounded up so poll() never returns before
  // the deadline and makes its caller spin; 0 once expired.
  int poll_ms() const;

 private:
  explicit Deadline(Clock::time_point end) : end_(end) {}
  Clock::time_point end_;
};

}  // namespace gang::base
