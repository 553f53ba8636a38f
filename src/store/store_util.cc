#include "store/store_util.h"

#include <charconv>
#include <climits>
#include <cstring>
#include <system_error>

#include "base/error.h"

namespace gang::store::detail {

std::string quote(const std::string& key) {
  constexpr size_t kShown = 120;
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  const size_t shown = key.size() > kShown ? kShown : key.size();
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  if (shown < key.size()) out += str_cat("... (", key.size(), " bytes)");
  return out;
}

int64_t add_decimal(const std::string& key, const Bytes* current,
                    int64_t delta) {
  int64_t base = 0;
  if (current != nullptr) {
    const char* first = reinterpret_cast<const char*>(current->data());
    const char* last = first + current->size();
    const auto [end, ec] = std::from_chars(first, last, base);
    if (current->empty() || ec != std::errc() || end != last) {
      fail(Status::kInvalidArgument, "store add: the value at key ", quote(key),
           " is not a decimal integer");
    }
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(base, delta, &sum)) {
    fail(Status::kInvalidArgument, "store add: ", base, " + ", delta,
         " at key ", quote(key), " overflows a 64-bit integer");
  }
  return sum;
}

Bytes decimal_bytes(int64_t value) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  (void)ec;  // 24 bytes always hold an int64
  return Bytes(buf, end);
}

void fail_missing(const char* op, const std::string& key, Millis timeout) {
  fail(Status::kTimeout, "store ", op, ": key ", quote(key),
       " did not appear within ", timeout.count(), " ms");
}

}  // namespace gang::store::detail
