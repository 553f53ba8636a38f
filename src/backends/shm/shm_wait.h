// Waiting on the shared segment: for a word to change (a barrier's
// generation), spinning briefly, then yielding, then sleeping on a futex,
// so that more ranks than cores still progress and an idle rank burns no
// core. Every wait ends at its deadline (kTimeout), when this rank aborted
// (kAborted), or when a peer failed or died (kPeerLost: the segment's failed
// flag, or a peer's pid that no longer exists).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "backends/shm/shm_segment.h"
#include "base/error.h"

namespace gang::backends::shm_impl {

// What a wait is for, as the operation that waits knows it: the waiter
// asks it, while it sleeps, whether a peer is in another operation (so a
// mismatch ends the wait at once, not at the deadline), and, for a timeout
// or a wait warning, whom the wait is for.
class Watch {
 public:
  virtual ~Watch() = default;
  // Throws kMismatch naming both operations when a peer is in another one.
  virtual void check_peers() const = 0;
  // "all_reduce #7 (float32, sum, count 4)", the operation that waits.
  virtual std::string operation() const = 0;
  // The ranks not there yet and where each was last seen.
  virtual Text missing() const = 0;
};

class Waiter {
 public:
  // `gang`: the gang's name, for wait warnings.
  Waiter(Segment& segment, int rank, std::string gang);

  // This rank's own abort: every wait ends with kAborted from now on.
  void abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // Returns once word differs from seen. `sleepers` counts this rank while
  // it sleeps on the futex (see wake_sleepers).
  // `watch` (may be null) is consulted once the wait sleeps: its checks at
  // every nap, its description in the timeout's message and in a warning
  // every GANG_WAIT_WARN_S while the wait lasts.
  void wait_change(const std::atomic<uint32_t>& word, uint32_t seen,
                   std::chrono::steady_clock::time_point deadline,
                   std::atomic<uint32_t>& sleepers,
                   const Watch* watch = nullptr) const;

  // Spins briefly (not at all when the gang has more ranks than the host
  // has cores) until word holds value; false if it still does not.
  bool spin_until(const std::atomic<uint64_t>& word, uint64_t value) const;

  // Throws if the gang failed, this rank aborted or a peer died.
  void check() const;

  // Marks the gang failed by this rank in the segment, with its status and
  // message, and wakes every barrier's sleepers; other waits nap briefly
  // and look again. The peers' waits then fail: with kMismatch for a
  // mismatch, kPeerLost otherwise, quoting `why`.
  void fail_gang(const Error& why) const noexcept;

  // Throws kPeerLost if rank r's process is gone.
  void check_alive(int r) const;

  // Wakes every rank sleeping on word.
  static void wake_all(std::atomic<uint32_t>& word);
  // Sleeps while word holds seen, for at most `for_at_most` (a shared
  // futex: the word lives in a mapping of several processes).
  static void sleep_on(const std::atomic<uint32_t>& word, uint32_t seen,
                       std::chrono::nanoseconds for_at_most);
  // The same after a change of word, without a system call when nobody
  // sleeps: a sleeper counts itself before it looks at the word a last
  // time (in the kernel), the waker changes the word before it looks at
  // the count; one of the two sees the other.
  static void wake_sleepers(std::atomic<uint32_t>& word,
                            const std::atomic<uint32_t>& sleepers) {
    if (sleepers.load(std::memory_order_seq_cst) != 0) wake_all(word);
  }

 private:
  void check_peers() const;

  Segment& segment_;
  int rank_;
  std::string gang_;
  std::chrono::milliseconds warn_every_;  // GANG_WAIT_WARN_S; 0: never
  std::atomic<bool> aborted_{false};
};

}  // namespace gang::backends::shm_impl
