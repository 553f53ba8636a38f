// Asking a store on the way to failing, without being held up by it: the
// store may be slow, gone, or busy with another thread's long wait.
#pragma once

#include <functional>
#include <string>

#include "base/deadline.h"

namespace gang::core {

using base::Millis;

// Runs f on a thread of its own and waits for it up to `limit`: f's result,
// or "" when it threw or did not end in time (it then ends on its own,
// holding only what it captured). Never throws.
std::string briefly(std::function<std::string()> f, Millis limit) noexcept;

}  // namespace gang::core
