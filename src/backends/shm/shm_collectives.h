// The shm backend's collectives: every rank stages its part in its own slot
// of the channel, the ranks meet at the channel's barrier, and each reads
// what it needs from the others' slots; large buffers go in slot-sized
// chunks. Reductions combine the ranks' inputs in rank order on every rank,
// so every rank computes the same bits; slots are used by halves in turns,
// so one meeting per chunk suffices. Each operation first publishes what
// it is (kind, dtype, op, root, counts); a rank that finds a peer in another
// operation fails with kMismatch naming both.
#pragma once

#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_wait.h"
#include "core/backend.h"

namespace gang::backends::shm_impl {

// Runs one collective of `op` (not send/recv) on channel `channel`. phase:
// the channel's count of meetings, kept by the caller across operations;
// turn: how many operations ran on the channel before this one;
// posted_broadcasts: the channel's count of broadcasts that did not meet.
void run_collective(Segment& segment, const Waiter& waiter, int rank,
                    int channel, uint64_t& phase, uint64_t turn,
                    uint32_t& posted_broadcasts, const core::Operation& op);

}  // namespace gang::backends::shm_impl
