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
  // Since when (steady clock, ns; 0: not blocked) the gang's rank has been
  // in the operation below, and which it is.
  std::atomic<int64_t> busy_since{0};
  std::atomic<uint64_t> busy_seq{0};
  std::atomic<int> busy_kind{0};  // OpKind
  bool warns_itself = false;      // the backend warns in its waits
  std::shared_ptr<FlightRecorder> recorder;  // may be null
  // The watchdog's own: the wait it last warned about, and how often.
  int64_t warned_since = 0;
  int64_t warnings = 0;
};

// Starts the watchdog if needed and watches `w` for as long as it lives.
void watch_gang(const std::shared_ptr<Watched>& w);

}  // namespace gang::core
