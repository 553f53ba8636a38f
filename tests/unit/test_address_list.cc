// test_address_list.cc - the list of listening addresses rank 0 publishes
// for a gloo gang (src/backends/gloo/gloo_address_list.cc): every rank's
// address comes back as it was, IPv4 and IPv6 mixed, hosts shared or not,
// in 6 bytes a rank and 21 a host; a list that is not one (short, long,
// no hosts, a rank placed past the hosts) is refused with kPeerLost.
// Compiled with the file it tests (not exported).
#include <cstring>
#include <vector>

// Before cmocka, whose fail() macro would take the library's fail().
#include "backends/gloo/gloo_address_list.h"
#include "base/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

namespace {

using gang::backends::gloo_impl::kAddressBytes;
using gang::backends::gloo_impl::pack_addresses;
using gang::backends::gloo_impl::unpack_addresses;

// An address in a rank's published form.
std::vector<char> address(int family, uint16_t port, uint32_t scope, uint8_t host) {
  std::vector<char> a(kAddressBytes, 0);
  a[0] = static_cast<char>(family);
  a[1] = static_cast<char>(port >> 8);
  a[2] = static_cast<char>(port & 0xff);
  a[3] = static_cast<char>(scope >> 24);
  a[6] = static_cast<char>(scope & 0xff);
  a[7] = 127;
  a[10] = static_cast<char>(host);
  if (family == 6) a[22] = static_cast<char>(host ^ 0x5a);
  return a;
}

void test_round_trip(void**) {
  // 64 ranks on 5 hosts (one of them IPv6 with a scope), ports all apart
  // but for two ranks of different hosts that share one.
  std::vector<std::vector<char>> each;
  for (int r = 0; r < 64; ++r) {
    const int host = r % 5;
    each.push_back(host == 4 ? address(6, static_cast<uint16_t>(40000 + r), 7, 4)
                             : address(4, static_cast<uint16_t>(30000 + r), 0,
                                       static_cast<uint8_t>(host)));
  }
  each[9] = address(4, 30001, 0, 4);  // rank 1's port on a host of its own
  const gang::store::Bytes list = pack_addresses(each);
  // 6 hosts of 21 bytes and 64 ranks of 6, after the count.
  assert_int_equal(list.size(), 4 + 6 * 21 + 64 * 6);
  const std::vector<std::vector<char>> back = unpack_addresses(list, 64);
  assert_int_equal(back.size(), 64);
  for (size_t r = 0; r < back.size(); ++r) {
    assert_int_equal(back[r].size(), kAddressBytes);
    assert_memory_equal(back[r].data(), each[r].data(), kAddressBytes);
  }
}

void test_one_host(void**) {
  std::vector<std::vector<char>> each;
  for (int r = 0; r < 1000; ++r) each.push_back(address(4, static_cast<uint16_t>(r + 1), 0, 1));
  const gang::store::Bytes list = pack_addresses(each);
  assert_int_equal(list.size(), 4 + 21 + 1000 * 6);
  const auto back = unpack_addresses(list, 1000);
  assert_memory_equal(back[999].data(), each[999].data(), kAddressBytes);
}

// The status unpack_addresses refuses `list` with, or kOk.
gang::Status refusal(const gang::store::Bytes& list, int size) {
  try {
    unpack_addresses(list, size);
  } catch (const gang::Error& e) {
    return e.status();
  }
  return gang::Status::kOk;
}

void test_malformed_lists(void**) {
  std::vector<std::vector<char>> each = {address(4, 1, 0, 1), address(4, 2, 0, 2),
                                         address(4, 3, 0, 1)};
  gang::store::Bytes list = pack_addresses(each);
  assert_int_equal(refusal(list, 3), gang::Status::kOk);
  assert_int_equal(refusal(list, 4), gang::Status::kPeerLost);  // fewer ranks than asked
  assert_int_equal(refusal(list, 2), gang::Status::kPeerLost);  // more
  gang::store::Bytes cut(list.begin(), list.end() - 1);
  assert_int_equal(refusal(cut, 3), gang::Status::kPeerLost);
  assert_int_equal(refusal(gang::store::Bytes(), 3), gang::Status::kPeerLost);
  gang::store::Bytes no_hosts = list;
  std::memset(no_hosts.data(), 0, 4);
  assert_int_equal(refusal(no_hosts, 3), gang::Status::kPeerLost);
  // Rank 2 placed on host 2 of 2.
  gang::store::Bytes past = list;
  past[4 + 2 * 21 + 2 * 6 + 3] = 2;
  assert_int_equal(refusal(past, 3), gang::Status::kPeerLost);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_one_host),
      cmocka_unit_test(test_malformed_lists),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
