// The listening addresses of a gloo gang's ranks as rank 0 publishes them
// for every rank to read: each distinct host address once, then per rank
// which one and its port. Every rank reads the list whole, so its size is
// the store's load times the ranks: 6 bytes a rank (and 21 a host) where a
// rank's own form takes 23.
#pragma once

#include <cstddef>
#include <vector>

#include "store/store.h"

namespace gang::backends::gloo_impl {

// A rank's listening address in the form a rank publishes: the family (4
// or 6), the port (2 bytes, big-endian), the IPv6 scope (4) and the
// address (16; an IPv4 one in the first 4).
constexpr size_t kAddressBytes = 1 + 2 + 4 + 16;

// The list of `each` (every entry kAddressBytes long; not checked here).
store::Bytes pack_addresses(const std::vector<std::vector<char>>& each);

// The `size` addresses of a list pack_addresses made; throws kPeerLost,
// saying what is wrong, for one that is not such a list.
std::vector<std::vector<char>> unpack_addresses(const store::Bytes& list, int size);

}  // namespace gang::backends::gloo_impl
