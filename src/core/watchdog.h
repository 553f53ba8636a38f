// The watchdog: one thread per process, started with the first gang, that
// (1) warns every GANG_WAIT_WARN_S while a gang's rank is blocked in an
// operation, naming the operation (backends that say more themselves, such
// as which ranks they wait for, set Capabilities::warns_while_waiting), and
// (2) writes every live gang's flight recorder when the process receives
// SIGURG, so that a launcher (gangrun) or a user can ask a running job for
// its recent operations without stopping it. SIGURG is ignored by default,
// so a rank that has no gang yet, or a program whose own handler is in
// place (gang then installs none), is not harmed by it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace gang::core {

class FlightRecorder;

// What the watchdog may read of a gang at any time, from its own thread.
struct Watched {
  std::string gang;
  int rank = 0;
  // The post the gang's rank is in (a number of its own, 0: none) and
  // which operation it is. No clock is read on the hot path: the watchdog
  // times a post from when it first sees it (to within its 1 s look).
  std::atomic<uint64_t> busy_post{0};
  std::atomic<uint64_t> busy_seq{0};
  std::atomic<int> busy_kind{0};  // OpKind
  bool warns_itself = false;      // the backend warns in its waits
  std::shared_ptr<FlightRecorder> recorder;  // may be null
  // The watchdog's own: the post it saw, since when, and how often it
  // warned about it.
  uint64_t seen_post = 0;
  int64_t seen_since = 0;
  int64_t warnings = 0;
};

// Starts the watchdog if needed and watches `w` for as long as it lives.
void watch_gang(const std::shared_ptr<Watched>& w);

}  // namespace gang::core
