// The Backend interface: what a transport must do for a gang. The core
// validates every argument before calling it, orders operations, applies
// timeouts and keeps the failed state; a backend only moves and reduces data.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/collective.h"
#include "core/types.h"

namespace gang::store {
class Store;
}

namespace gang::core {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// now + timeout, saturating at a century so that huge timeouts (INT64_MAX
// ms) cannot overflow the clock's nanoseconds.
inline Clock::time_point deadline_after(Millis timeout) {
  constexpr Millis kCentury{100LL * 365 * 24 * 3600 * 1000};
  return Clock::now() + (timeout < kCentury ? timeout : kCentury);
}

class Backend;

struct BackendConfig {
  int rank = 0;
  int size = 1;
  DeviceType device_type = DeviceType::kCpu;
  int device_index = -1;
  // Rendezvous for this gang only (already prefixed); null when size is 1.
  std::shared_ptr<store::Store> store;
  Millis timeout{600000};
  // The backend of the gang this one is split from, or null. A backend may
  // share resources (a network device, a thread) with it.
  const Backend* parent = nullptr;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;

  // Whether op over dtype can be reduced. Called before issue.
  virtual bool supports(ReduceOp op, DType dtype) const = 0;

  // True when this process stands in for every rank (the fake gang): there
  // are no peers, so point-to-point and splitting by color are meaningless.
  virtual bool emulates_peers() const { return false; }

  // Runs one validated operation to completion. `seq` numbers the gang's
  // collectives, the same on every rank (point-to-point operations involve
  // only two ranks, so they take no number and get 0). Every wait ends by
  // `deadline`.
  // Throws gang::Error: kTimeout, kPeerLost, kAborted (after abort()),
  // kSystem, kInternal.
  virtual void run(const CollectiveArgs& args, uint64_t seq,
                   Clock::time_point deadline) = 0;

  // Runs a group: every operation starts before any is waited for, so both
  // sides of an exchange may send first. ops[i] has sequence number seqs[i].
  virtual void run_group(const std::vector<CollectiveArgs>& ops,
                         const std::vector<uint64_t>& seqs,
                         Clock::time_point deadline) = 0;

  // Makes a run() in progress, on any thread, throw kAborted promptly, and
  // tells the peers (their operations with this rank fail). Idempotent and
  // thread-safe.
  virtual void abort() noexcept = 0;
};

using BackendFactory = std::unique_ptr<Backend> (*)(const BackendConfig&);

}  // namespace gang::core
