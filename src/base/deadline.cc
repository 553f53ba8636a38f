#include "base/deadline.h"

#include <climits>

namespace gang::base {

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
