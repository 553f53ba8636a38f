#include "base/copy.h"

#include <cstdint>
#include <cstring>

namespace gang::base {

namespace {

// Below glibc's default `rep movsb` threshold (2112 bytes).
constexpr size_t kPiece = 2048;
// From about here on glibc no longer uses `rep movsb` on this machine (and
// pieces would only add calls).
constexpr size_t kSlowBelow = 512 << 10;

bool slow_pair(const void* dst, const void* src, size_t n) {
  const uintptr_t gap =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return n > kPiece && n < kSlowBelow && gap != 0 && gap < 64;
}

}  // namespace

void copy_bytes(void* dst, const void* src, size_t n) noexcept {
  if (n == 0 || dst == src) return;
  if (!slow_pair(dst, src, n)) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  for (size_t at = 0; at < n; at += kPiece) {
    std::memcpy(to + at, from + at, n - at < kPiece ? n - at : kPiece);
  }
}

void move_bytes(void* dst, const void* src, size_t n) noexcept {
  if (n == 0 || dst == src) return;
  auto* to = static_cast<uint8_t*>(dst);
  const auto* from = static_cast<const uint8_t*>(src);
  const bool overlap = to < from + n && from < to + n;
  if (!slow_pair(dst, src, n)) {
    std::memmove(dst, src, n);
  } else if (!overlap) {
    copy_bytes(dst, src, n);
  } else if (to < from) {  // forward, piece by piece
    for (size_t at = 0; at < n; at += kPiece) {
      std::memmove(to + at, from + at, n - at < kPiece ? n - at : kPiece);
    }
  } else {  // backward, so no piece overwrites source not yet moved
    for (size_t end = n; end > 0;) {
      const size_t len = end < kPiece ? end : kPiece;
      end -= len;
      std::memmove(to + end, from + end, len);
    }
  }
}

}  // namespace gang::base
