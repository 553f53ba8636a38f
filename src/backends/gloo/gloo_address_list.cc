#include "backends/gloo/gloo_address_list.h"

#include <cstring>
#include <map>
#include <string>

#include "base/big_endian.h"
#include "base/error.h"

namespace gang::backends::gloo_impl {

namespace {

// An address without its port: the family, the scope and the address.
constexpr size_t kPortAt = 1;
constexpr size_t kPortBytes = 2;
constexpr size_t kHostBytes = kAddressBytes - kPortBytes;
// Per rank: its host's place in the list (4 bytes) and its port.
constexpr size_t kRankBytes = 4 + kPortBytes;

std::string host_of(const std::vector<char>& a) {
  std::string h(a.begin(), a.begin() + kPortAt);
  h.append(a.begin() + kPortAt + kPortBytes, a.end());
  return h;
}

}  // namespace

store::Bytes pack_addresses(const std::vector<std::vector<char>>& each) {
  std::map<std::string, uint32_t> place;
  std::vector<const std::string*> hosts;
  std::vector<uint32_t> place_of(each.size());
  for (size_t r = 0; r < each.size(); ++r) {
    const auto [it, fresh] = place.emplace(host_of(each[r]), static_cast<uint32_t>(hosts.size()));
    if (fresh) hosts.push_back(&it->first);
    place_of[r] = it->second;
  }
  store::Bytes out(4 + hosts.size() * kHostBytes + each.size() * kRankBytes);
  uint8_t* p = out.data();
  base::put_be32(p, static_cast<uint32_t>(hosts.size()));
  p += 4;
  for (const std::string* h : hosts) {
    std::memcpy(p, h->data(), kHostBytes);
    p += kHostBytes;
  }
  for (size_t r = 0; r < each.size(); ++r) {
    base::put_be32(p, place_of[r]);
    std::memcpy(p + 4, each[r].data() + kPortAt, kPortBytes);
    p += kRankBytes;
  }
  return out;
}

std::vector<std::vector<char>> unpack_addresses(const store::Bytes& list, int size) {
  const size_t n = static_cast<size_t>(size);
  const size_t hosts = list.size() >= 4 ? base::get_be32(list.data()) : 0;
  if (list.size() < 4 || hosts == 0 || hosts > n ||
      list.size() != 4 + hosts * kHostBytes + n * kRankBytes) {
    fail(Status::kPeerLost, "gang_create: rank 0 published ", list.size(),
         " bytes of listening addresses, which is not a list of ", size, " ranks' addresses");
  }
  const uint8_t* host_at = list.data() + 4;
  const uint8_t* rank_at = host_at + hosts * kHostBytes;
  std::vector<std::vector<char>> out(n, std::vector<char>(kAddressBytes));
  for (size_t r = 0; r < n; ++r, rank_at += kRankBytes) {
    const uint32_t h = base::get_be32(rank_at);
    if (h >= hosts) {
      fail(Status::kPeerLost, "gang_create: rank 0's list of listening addresses places rank ",
           r, " on host ", h, " of ", hosts);
    }
    const uint8_t* host = host_at + h * kHostBytes;
    char* a = out[r].data();
    std::memcpy(a, host, kPortAt);
    std::memcpy(a + kPortAt, rank_at + 4, kPortBytes);
    std::memcpy(a + kPortAt + kPortBytes, host + kPortAt, kHostBytes - kPortAt);
  }
  return out;
}

}  // namespace gang::backends::gloo_impl
