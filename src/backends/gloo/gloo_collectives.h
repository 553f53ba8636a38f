// Each gang operation expressed with Gloo's algorithms and unbound buffers.
#pragma once

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

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
// size and rank count (the thresholds in gloo_collectives.cc); the others
// force one wherever it applies, so that gang-bench can time each and the
// thresholds can be checked. From GANG_GLOO_ALGORITHM (auto, direct, ring,
// tree), which must be the same on every rank.
//   direct: every rank exchanges with every other in one step (all-reduce,
//           broadcast, all-gather; gangs of up to 8 ranks)
//   ring:   reduce-scatter and all-gather around the ring (all-reduce,
//           all-gather); for broadcast, the root scatters and a ring
//           all-gather completes
//   tree:   broadcast down a binomial tree (gangs of up to 8 ranks)
enum class Algorithm : uint8_t { kAuto, kDirect, kRing, kTree };

// GANG_GLOO_ALGORITHM's value; throws kInvalidArgument naming it.
Algorithm algorithm_from_env();

// Runs one collective (not send/recv), framed (see gloo_frames.h); every
// wait ends by the operation's deadline.
void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const std::shared_ptr<Waits>& waits, Scratch& scratch,
                    Algorithm algorithm, const core::Operation& op);

// Turns a Gloo exception into a gang error (never returns): after abort the
// broken connections are our own doing (kAborted); at the deadline it is
// kTimeout; otherwise a peer is gone (kPeerLost).
// A lost peer is named: `peer` when the operation had one, else those whose
// connection with this rank `context` sees broken.
[[noreturn]] void rethrow_gloo(const ::gloo::Exception& e,
                               core::Clock::time_point deadline, bool aborted,
                               ::gloo::Context& context, int peer = -1);

// A send or receive posted to Gloo's pairs, framed like the collectives,
// with everything posted the moment it is issued, so a transfer never waits
// for anyone to drive it. A send posts its frame (the payload inline when
// it fits) and its payload; a receive posts its frame receive and its
// payload receives. Payloads travel in chunks of at most kChunkBytes whose
// exact size is part of the slot, so a payload of another size never lands
// in a receive (which would make Gloo abort the process): it just never
// matches, and the receiver's frame check reports the mismatch. Waits
// happen on the caller's thread for a wait to the deadline, else on a
// thread of the work's own, started on the first poll (a Gloo wait that
// times out tears down every connection of the context, so a short poll
// cannot wait in Gloo itself).
class GlooP2PWork final : public core::BackendWork {
 public:
  static constexpr unsigned kChunkLog2 = 23;
  static constexpr size_t kChunkBytes = size_t{1} << kChunkLog2;

  GlooP2PWork(std::shared_ptr<::gloo::Context> ctx, std::shared_ptr<Waits> waits,
              const core::Operation& op);
  ~GlooP2PWork() override;

  bool test() override;
  bool wait(core::Clock::time_point until) override;

 private:
  void await();
  void check_received_frame();
  bool outcome_locked();

  std::shared_ptr<::gloo::Context> ctx_;
  bool is_send_;
  int peer_;
  int tag_;
  core::Channel channel_;
  core::DType dtype_;
  size_t count_;
  size_t bytes_;
  void* data_;
  core::Clock::time_point deadline_;
  std::shared_ptr<Waits> waits_;
  // Frame sent (send) or received (receive); the buffers over it and the
  // payload (one transfer per chunk on the payload buffer).
  std::unique_ptr<uint8_t[]> frame_;
  std::unique_ptr<WaitableBuffer> frame_buf_;
  std::unique_ptr<WaitableBuffer> payload_buf_;
  size_t chunks_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool claimed_ = false;
  bool done_ = false;
  Status status_ = Status::kOk;
  std::string what_;
  std::thread waiter_;
};

}  // namespace gang::backends::gloo_impl
