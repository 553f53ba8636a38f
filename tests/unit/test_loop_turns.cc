// test_loop_turns.cc - prompt turns of a Gloo device's event loop
// (src/backends/gloo/gloo_loop_turns.cc). Gloo's loop, asked from another
// thread to stop watching a descriptor, waits for its next turn, which an
// idle loop takes every 10 ms: 40 such calls take about 400 ms on a plain
// device, and well under half of that while a PromptTurns is held on a
// prompted one. Once the last holder lets go the loop is idle again (it
// does not spin), holders on several threads at once are counted, and a
// PromptTurns on a device that was not prompted (or none) does nothing.
// Compiled with the file it tests (not exported).
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "backends/gloo/gloo_loop_turns.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

extern "C" {
#include <cmocka.h>
}

namespace {

namespace tcp = ::gloo::transport::tcp;
using gang::backends::gloo_impl::PromptTurns;
using gang::backends::gloo_impl::with_prompt_turns;
using Clock = std::chrono::steady_clock;

std::shared_ptr<tcp::Device> plain_device() {
  tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return std::dynamic_pointer_cast<tcp::Device>(tcp::CreateDevice(attr));
}

// A descriptor that is never ready: its handler is never called.
struct Quiet final : tcp::Handler {
  int fds[2] = {-1, -1};
  Quiet() { assert_int_equal(::pipe(fds), 0); }
  ~Quiet() override {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  void handleEvents(int) override { fail_msg("a quiet descriptor's handler ran"); }
};

// Milliseconds that `cycles` times leaving the loop (and joining it again)
// take on `device`, with a PromptTurns held throughout when `prompt`.
double leave_ms(tcp::Device* device, int cycles, bool prompt) {
  Quiet q;
  device->registerDescriptor(q.fds[0], EPOLLIN, &q);
  std::unique_ptr<PromptTurns> held;
  if (prompt) held = std::make_unique<PromptTurns>(device);
  const auto start = Clock::now();
  for (int i = 0; i < cycles; ++i) {
    device->unregisterDescriptor(q.fds[0], &q);
    if (i + 1 < cycles) device->registerDescriptor(q.fds[0], EPOLLIN, &q);
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// CPU milliseconds this process spends in `ms` of sleep.
double cpu_while_sleeping(int ms) {
  const auto used = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
  };
  const double before = used();
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return used() - before;
}

constexpr int kCycles = 40;

void test_prompted_leave_is_prompt(void**) {
  auto plain = plain_device();
  auto prompted = with_prompt_turns(plain_device());
  const double slow = leave_ms(plain.get(), kCycles, false);
  const double fast = leave_ms(prompted.get(), kCycles, true);
  print_message("%d leaves: %.1f ms on a plain device, %.1f ms prompted\n", kCycles, slow, fast);
  // A turn every 10 ms: the plain loop's waits are most of that each.
  assert_true(slow > kCycles * 4.0);
  assert_true(fast * 2 < slow);
  // Unheld, a prompted device's loop keeps its own pace as well.
  const double unheld = leave_ms(prompted.get(), kCycles / 4, false);
  assert_true(unheld > kCycles / 4 * 4.0);
}

void test_idle_once_released(void**) {
  auto prompted = with_prompt_turns(plain_device());
  {
    PromptTurns a(prompted.get());
    PromptTurns b(prompted.get());  // two at once: the loop spins until both go
  }
  // A loop left spinning would use about all of the 200 ms.
  const double cpu = cpu_while_sleeping(200);
  print_message("CPU while idle: %.1f ms of 200\n", cpu);
  assert_true(cpu < 60);
}

void test_holders_on_many_threads(void**) {
  auto prompted = with_prompt_turns(plain_device());
  std::vector<std::thread> threads;
  std::vector<double> took(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { took[static_cast<size_t>(t)] = leave_ms(prompted.get(), 20, true); });
  }
  for (auto& t : threads) t.join();
  for (double ms : took) assert_true(ms < 20 * 4.0);
  assert_true(cpu_while_sleeping(200) < 60);
}

void test_unprompted_devices(void**) {
  auto plain = plain_device();
  { PromptTurns p(plain.get()); }
  { PromptTurns p(nullptr); }
  // And a prompted device outlives none of its holders' effects.
  auto prompted = with_prompt_turns(plain_device());
  { PromptTurns p(prompted.get()); }
  prompted.reset();
  assert_true(cpu_while_sleeping(100) < 40);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prompted_leave_is_prompt),
      cmocka_unit_test(test_idle_once_released),
      cmocka_unit_test(test_holders_on_many_threads),
      cmocka_unit_test(test_unprompted_devices),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
