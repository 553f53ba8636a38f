/*
 * test_float_env.c - a program that unmasks floating-point exceptions (as
 * Free Pascal does by default, or C with feenableexcept) is not killed by
 * SIGFPE inside a reduction: sums that overflow to infinity and meet
 * inf - inf give IEEE 754's inf and NaN, on shm and on gloo, for float32,
 * float64, float16 and bfloat16, and AVG; and the caller's environment
 * comes back as it was (the exceptions still unmasked).
 */
#define _GNU_SOURCE
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <gang/gang.h>

#include "harness.h"

#define TRAPS (FE_OVERFLOW | FE_INVALID | FE_DIVBYZERO)

static int rank_traps(gang_t* g, int rank, int size, void* arg) {
  float f[3], fo[3];
  double d[2], dout[2];
  uint16_t h[2], ho[2], b[2], bo[2];
  (void)arg;
  (void)size;
  CHECK(feenableexcept(TRAPS) != -1, "feenableexcept");
  /* FLT_MAX + FLT_MAX overflows; +inf + -inf is invalid. */
  f[0] = FLT_MAX;
  f[1] = rank == 0 ? INFINITY : -INFINITY;
  f[2] = 1.0f;
  CHECK_OK(gang_all_reduce(g, f, fo, 3, GANG_FLOAT32, GANG_SUM, NULL));
  CHECK(isinf(fo[0]) && fo[0] > 0, "FLT_MAX + FLT_MAX gave %g", (double)fo[0]);
  CHECK(isnan(fo[1]), "inf + -inf gave %g", (double)fo[1]);
  CHECK(fo[2] == 2.0f, "1 + 1 gave %g", (double)fo[2]);
  d[0] = DBL_MAX;
  d[1] = 3.0;
  CHECK_OK(gang_all_reduce(g, d, dout, 2, GANG_FLOAT64, GANG_AVG, NULL));
  CHECK(isinf(dout[0]), "the average of DBL_MAX twice (sum overflows) gave %g", dout[0]);
  CHECK(dout[1] == 3.0, "the average of 3 and 3 gave %g", dout[1]);
  h[0] = 0x7bff; /* float16's largest, 65504 */
  h[1] = 0x3c00; /* 1 */
  CHECK_OK(gang_all_reduce(g, h, ho, 2, GANG_FLOAT16, GANG_SUM, NULL));
  CHECK(ho[0] == 0x7c00 && ho[1] == 0x4000, "float16 sums %#x %#x", ho[0], ho[1]);
  b[0] = 0x7f7f; /* bfloat16's largest */
  b[1] = 0x3f80; /* 1 */
  CHECK_OK(gang_all_reduce(g, b, bo, 2, GANG_BFLOAT16, GANG_SUM, NULL));
  CHECK(bo[0] == 0x7f80 && bo[1] == 0x4000, "bfloat16 sums %#x %#x", bo[0], bo[1]);
  CHECK(fegetexcept() == TRAPS, "the caller's unmasked exceptions came back as %#x, not %#x",
        fegetexcept(), TRAPS);
  return 0;
}

static void test_shm(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "shm", rank_traps, NULL, 10000, 60), 0);
}

static void test_gloo(void** s) {
  (void)s;
  assert_int_equal(gang_test_run_ranks(2, "gloo", rank_traps, NULL, 10000, 60), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shm),
      cmocka_unit_test(test_gloo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
