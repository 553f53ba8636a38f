// Helpers shared by the store implementations: quoting keys and the decimal
// counters behind add().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "base/deadline.h"
#include "base/text.h"
#include "store/store.h"

namespace gang::store::detail {

using base::Clock;
using base::Deadline;
using base::errno_text;

// The key in double quotes for messages, non-printable bytes escaped and a
// long key shortened, so a 4 KiB binary key cannot swamp a message.
std::string quote(const std::string& key);

// The value add() stores: `current` (nullptr: the key is missing, read as 0)
// parsed as a decimal int64, plus delta. Throws kInvalidArgument when the
// value is not a decimal integer or the sum overflows.
int64_t add_decimal(const std::string& key, const Bytes* current,
                    int64_t delta);
Bytes decimal_bytes(int64_t value);

// kTimeout for get/wait, whose key never appeared.
[[noreturn]] void fail_missing(const char* op, const std::string& key,
                               Millis timeout);

}  // namespace gang::store::detail
