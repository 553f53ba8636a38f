// test_copy.cc - base::copy_bytes and base::move_bytes (src/base/copy.cc)
// give memcpy's and memmove's results for every gap between destination
// and source (those copied in pieces among them), sizes around the piece
// and the limits, and overlaps in both directions. Compiled with the one
// source it tests.
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

#include <cstring>
#include <vector>

#include "base/copy.h"

namespace {

const size_t kSizes[] = {0, 1, 63, 2047, 2048, 2049, 4096 + 17, 100000, (512 << 10) - 1,
                         (512 << 10) + 5};
const size_t kGaps[] = {0, 1, 16, 31, 63, 64, 100, 4095};

uint8_t pattern(size_t i) { return static_cast<uint8_t>(i * 131 + (i >> 8) * 7 + 1); }

void test_copy_every_gap(void**) {
  std::vector<uint8_t> src((1 << 20) + 8192), dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(i);
  for (size_t n : kSizes) {
    for (size_t gap : kGaps) {
      std::memset(dst.data(), 0, dst.size());
      uint8_t* to = dst.data() + 4096 + gap;
      const uint8_t* from = src.data() + 4096;
      gang::base::copy_bytes(to, from, n);
      assert_memory_equal(to, from, n);
      // Nothing around the destination is touched.
      assert_int_equal(to[-1], 0);
      assert_int_equal(to[n], 0);
    }
  }
}

void test_move_overlapping(void**) {
  const size_t len = (1 << 20) + 8192;
  std::vector<uint8_t> buf(len), want(len);
  for (size_t n : kSizes) {
    for (size_t gap : kGaps) {
      for (int dir = 0; dir < 2; ++dir) {
        for (size_t i = 0; i < len; ++i) buf[i] = want[i] = pattern(i);
        // dir 0: the destination lies `gap` bytes after the source; dir 1:
        // 4096 - gap bytes before it (the same gap modulo a page).
        const size_t from = 8192 - 4096;
        const size_t to = dir == 0 ? from + gap : from + gap - (gap == 0 ? 0 : 4096);
        std::memmove(want.data() + to, want.data() + from, n);
        gang::base::move_bytes(buf.data() + to, buf.data() + from, n);
        assert_memory_equal(buf.data(), want.data(), len);
      }
    }
  }
}

void test_null_when_empty(void**) {
  // A collective of count 0 may hand NULL buffers down.
  gang::base::copy_bytes(nullptr, nullptr, 0);
  gang::base::move_bytes(nullptr, nullptr, 0);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copy_every_gap),
      cmocka_unit_test(test_move_overlapping),
      cmocka_unit_test(test_null_when_empty),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
