// test_secret.cc - SHA-256 and HMAC-SHA-256 (src/base/secret.cc) against
// the published test vectors (FIPS 180-4 examples, RFC 4231), and the
// helpers beside them. Compiled with the few sources it tests.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <string>

#include "base/secret.h"

namespace {

std::string hex_of(const gang::base::Digest& d) {
  return gang::base::hex(std::string(d.begin(), d.end()));
}

std::string sha_hex(const std::string& s) {
  return hex_of(gang::base::sha256(s.data(), s.size()));
}

void test_sha256_vectors(void**) {
  assert_string_equal(sha_hex("").c_str(),
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert_string_equal(sha_hex("abc").c_str(),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the length no longer fits the first block's padding.
  assert_string_equal(
      sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").c_str(),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  assert_string_equal(sha_hex(std::string(1000000, 'a')).c_str(),
      "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

void test_hmac_vectors(void**) {
  using gang::base::hmac_sha256;
  assert_string_equal(hex_of(hmac_sha256(std::string(20, '\x0b'), "Hi There")).c_str(),
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  assert_string_equal(
      hex_of(hmac_sha256("Jefe", "what do ya want for nothing?")).c_str(),
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than a block is hashed first.
  assert_string_equal(
      hex_of(hmac_sha256(std::string(131, '\xaa'),
                         "Test Using Larger Than Block-Size Key - Hash Key First"))
          .c_str(),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

void test_equal_and_random(void**) {
  using gang::base::equal_in_constant_time;
  assert_true(equal_in_constant_time("secret", "secret"));
  assert_false(equal_in_constant_time("secret", "secreT"));
  assert_false(equal_in_constant_time("secret", "secret2"));
  assert_false(equal_in_constant_time("", "x"));
  assert_true(equal_in_constant_time("", ""));
  const std::string a = gang::base::random_bytes(32);
  const std::string b = gang::base::random_bytes(32);
  assert_int_equal(a.size(), 32);
  assert_false(a == b);  // 2^-256
  assert_string_equal(gang::base::hex(std::string("\x00\x7f\xff", 3)).c_str(), "007fff");
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_hmac_vectors),
      cmocka_unit_test(test_equal_and_random),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
