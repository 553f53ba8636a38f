// The caller's floating-point environment, held while gang's own
// arithmetic runs. A program may unmask floating-point exceptions (Free
// Pascal does by default; C with feenableexcept), and a reduction that
// overflows to infinity, or meets inf - inf, would then kill it with
// SIGFPE inside gang. A reduction's result is defined (IEEE 754's inf and
// NaN), so gang computes it with every exception masked and gives the
// caller back its environment as it was: masks and flags both.
#pragma once

#include <fenv.h>

namespace gang::base {

class FloatEnvHold {
 public:
  // Costs two register reads when no exception is unmasked, the usual case.
  FloatEnvHold() noexcept : held_(fegetexcept() != 0) {
    if (held_) feholdexcept(&saved_);
  }
  ~FloatEnvHold() {
    if (held_) fesetenv(&saved_);
  }
  FloatEnvHold(const FloatEnvHold&) = delete;
  FloatEnvHold& operator=(const FloatEnvHold&) = delete;

 private:
  bool held_;
  fenv_t saved_;
};

}  // namespace gang::base
