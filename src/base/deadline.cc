#include "base/deadline.h"

#include <time.h>

#include <climits>
#include <type_traits>

namespace gang::base {

Clock::time_point coarse_now() {
#ifdef CLOCK_MONOTONIC_COARSE
  static_assert(std::is_same_v<Clock, std::chrono::steady_clock>,
                "coarse_now reads the clock behind steady_clock");
  timespec t;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &t) == 0) {
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
        std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
  }
#endif
  return Clock::now();
}

Clock::duration Deadline::remaining() const {
  const auto left = end_ - Clock::now();
  return left > Clock::duration::zero() ? left : Clock::duration::zero();
}

Millis Deadline::remaining_ms() const {
  return std::chrono::ceil<Millis>(remaining());
}

int Deadline::poll_ms() const {
  const auto ms = remaining_ms().count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace gang::base
