// FNV-1a: a hash that is the same in every process and build (std::hash
// is not), for what ranks compare across processes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gang::base {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace gang::base
