// Secrets and proofs of knowing them: random bytes from the kernel, SHA-256
// and HMAC-SHA-256 (FIPS 180-4, RFC 2104), and a comparison whose time does
// not depend on where two byte strings differ. Used to authenticate the
// connections between a gang's ranks and the clients of a store.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gang::base {

constexpr size_t kDigestBytes = 32;
using Digest = std::array<uint8_t, kDigestBytes>;

// n bytes from getrandom(2). Throws gang::Error (kSystem) when the kernel
// cannot give them.
std::string random_bytes(size_t n);

Digest sha256(const void* data, size_t n);

// HMAC-SHA-256 of `message` under `key` (any length; longer than a block is
// hashed first, as RFC 2104 says).
Digest hmac_sha256(const std::string& key, const std::string& message);

// a == b, visiting every byte of the longer one whatever the contents.
bool equal_in_constant_time(const std::string& a, const std::string& b);

// Lowercase hexadecimal of `bytes`.
std::string hex(const std::string& bytes);

}  // namespace gang::base
