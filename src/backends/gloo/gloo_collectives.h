// The gloo backend's collectives: gang implements its own algorithms
// (gloo_algorithms.h) over Gloo's pairs and unbound buffers, and
// run_collective (gloo_dispatch.cc) picks one for each operation.
#pragma once

#include <gloo/context.h>

#include <cstdint>
#include <memory>

#include "backends/gloo/gloo_frames.h"
#include "core/backend.h"

namespace gang::backends::gloo_impl {

// The Gloo tag of an operation (16 bits): its sequence number, with the
// channel in the top bits so the user's collectives, the fingerprints and
// the core's control traffic never share a slot.
uint32_t wire_tag(const core::Operation& op);

// Working memory a backend keeps between operations, one per channel (the
// channels' operations may run at once): the peers' inputs of a direct
// reduction, a ring's incoming chunk, an accumulator. Fresh memory on every
// call cost a page fault per 4 KiB touched, more than the reduction itself
// at large sizes. Grows to the largest size asked, uninitialised.
class Scratch {
 public:
  static constexpr int kParts = 2;
  uint8_t* get(int part, size_t bytes);

 private:
  std::unique_ptr<uint8_t[]> buf_[kParts];
  size_t cap_[kParts] = {};
};

// Which algorithm the collectives that have a choice take: kAuto picks by
// size and rank count (the thresholds in gloo_dispatch.cc); the others
// force one wherever it applies, so that gang-bench can time each and the
// thresholds can be checked. From GANG_GLOO_ALGORITHM (auto, direct, ring,
// tree), which must be the same on every rank.
//   direct: every rank exchanges with every other in one step (all-reduce,
//           broadcast, all-gather; gangs of up to 8 ranks)
//   ring:   reduce-scatter and all-gather around the ring (all-reduce,
//           all-gather); for broadcast, the root scatters and a ring
//           all-gather completes
//   tree:   broadcast down a binomial tree
// and, chosen only by kAuto:
//   doubling: all-reduce in log2 n rounds of one exchange (small buffers
//           on gangs over 8 ranks)
enum class Algorithm : uint8_t { kAuto, kDirect, kRing, kTree, kDoubling };

// GANG_GLOO_ALGORITHM's value; throws kInvalidArgument naming it.
Algorithm algorithm_from_env();

// Runs one collective (not send/recv) with the algorithm chosen for it,
// framed (see gloo_frames.h); every wait ends by the operation's deadline.
void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const std::shared_ptr<Waits>& waits, Scratch& scratch,
                    Algorithm algorithm, const core::Operation& op);

}  // namespace gang::backends::gloo_impl
