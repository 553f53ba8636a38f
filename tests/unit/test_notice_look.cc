// test_notice_look.cc - the pace of the notice watcher's looks at a job's
// count of posted failures (src/core/notice_watcher.h), every process of
// the job looking for itself. A small job's processes look every 100 ms,
// so that a notice reaches every rank within about that; a wide job's
// together ask its store at most about 4,000 times a second (at 100 ms a
// job of 4096 processes asked 41,000 times a second, forever, while
// nothing failed), and no process waits more than a second between looks.
// The header alone (not exported).
#include <chrono>
#include <cstdint>

#include "core/notice_watcher.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

namespace {

using gang::core::notice_look_interval;

// Looks a second the job's processes make together.
double job_rate(int ranks) {
  return ranks * 1000.0 / static_cast<double>(notice_look_interval(ranks).count());
}

void test_small_jobs_look_often(void**) {
  for (int ranks = 1; ranks <= 400; ++ranks) {
    assert_int_equal(notice_look_interval(ranks).count(), 100);
  }
  // Nonsense in, the shortest pace out.
  assert_int_equal(notice_look_interval(0).count(), 100);
  assert_int_equal(notice_look_interval(-5).count(), 100);
}

void test_wide_jobs_spare_the_store(void**) {
  for (int ranks = 2; ranks <= 4000; ranks += 7) {
    if (job_rate(ranks) > 4000 * 1.01) {
      fail_msg("%d ranks look %.0f times a second together", ranks, job_rate(ranks));
    }
  }
  // Where the bound on the wait takes over, the rate grows with the job
  // again, at one look a second a process.
  assert_true(job_rate(4096) <= 4096 * 1.0 + 1e-9);
  assert_true(job_rate(1 << 20) <= (1 << 20) * 1.0 + 1e-9);
}

void test_never_more_than_a_second(void**) {
  int64_t before = 0;
  for (int ranks = 1; ranks <= (1 << 22); ranks = ranks * 3 / 2 + 1) {
    const int64_t ms = notice_look_interval(ranks).count();
    assert_true(ms >= 100 && ms <= 1000);
    // A wider job never looks more often.
    assert_true(ms >= before);
    before = ms;
  }
  assert_int_equal(notice_look_interval(1 << 30).count(), 1000);
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_small_jobs_look_often),
      cmocka_unit_test(test_wide_jobs_spare_the_store),
      cmocka_unit_test(test_never_more_than_a_second),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
