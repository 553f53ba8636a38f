// The shm backend's collectives: every rank stages its part in its own slot
// of the channel, the ranks meet at the channel's barrier, and each reads
// what it needs from the others' slots; large buffers go in slot-sized
// chunks. Reductions combine the ranks' inputs in rank order on every rank,
// so every rank computes the same bits; slots are used by halves in turns,
// so one meeting per chunk suffices. Each operation first publishes what
// it is (kind, dtype, op, root, counts, and the broadcasts that did not meet
// before it); a rank that finds a peer in another operation fails with
// kMismatch naming both, at the first meeting or, while it waits, at once.
// Operations whose input fits a description (Run::goes_inline) meet by
// the descriptions alone: no barrier, no slot.
#pragma once

#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_wait.h"
#include "core/backend.h"

namespace gang::backends::shm_impl {

// What a rank keeps per channel between operations; the same on every rank
// that ran the same operations.
struct ChannelState {
  uint64_t phase = 0;       // meetings so far
  uint64_t turns = 0;       // operations so far (several may share a seq)
  uint32_t broadcasts = 0;  // broadcasts that did not meet
  uint64_t history = 0;     // their hash (BroadcastRecord::history)
  // Every broadcast meets (the core's control traffic: byte payloads and
  // flags, where a meeting costs nothing that matters and catches a
  // disagreement at once).
  bool broadcasts_meet = false;
};

// Runs one collective of `op` (not send/recv) on channel `channel`.
void run_collective(Segment& segment, const Waiter& waiter, int rank,
                    int channel, ChannelState& state, const core::Operation& op);

}  // namespace gang::backends::shm_impl
