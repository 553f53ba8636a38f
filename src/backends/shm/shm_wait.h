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

#include "backends/shm/shm_segment.h"

namespace gang::backends::shm_impl {

class Waiter {
 public:
  Waiter(Segment& segment, int rank) : segment_(segment), rank_(rank) {}

  // This rank's own abort: every wait ends with kAborted from now on.
  void abort() { aborted_.store(true, std::memory_order_release); }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // Returns once word differs from seen.
  void wait_change(const std::atomic<uint32_t>& word, uint32_t seen,
                   std::chrono::steady_clock::time_point deadline) const;

  // Throws if the gang failed, this rank aborted or a peer died.
  void check() const;

  // Throws kPeerLost if rank r's process is gone.
  void check_alive(int r) const;

  // Wakes every rank sleeping on word.
  static void wake_all(std::atomic<uint32_t>& word);

 private:
  void check_peers() const;

  Segment& segment_;
  int rank_;
  std::atomic<bool> aborted_{false};
};

}  // namespace gang::backends::shm_impl
