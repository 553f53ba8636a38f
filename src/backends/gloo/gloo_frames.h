// Frames: how the Gloo backend keeps a peer's mistake from killing this
// process.
//
// Gloo's TCP pairs abort the process when a message arrives that is longer
// than the receive posted for it (an enforce on Gloo's I/O thread). So no
// payload ever travels between two ranks before they have agreed on its
// size: at the start of every operation, each rank exchanges one fixed-size
// frame with each rank it will talk to in that operation. The frame says
// what the sender called (operation, dtype, op, root, counts) and what it
// will send to and expects from the receiver; a receiver that finds another
// operation fails with GANG_ERR_MISMATCH naming both calls and posts no
// payload. Payloads of up to kInlineBytes ride inside the frame, so a small
// operation still costs one message per peer. An operation one rank sends
// to all (broadcast, scatter) routes its frames instead of exchanging them,
// so that the root sends n - 1 and receives one (agree_from_root,
// gloo_run.h).
#pragma once

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/backend.h"

namespace gang::backends::gloo_impl {

constexpr size_t kInlineBytes = 72;

// A collective's slot: the kind of traffic (top byte), the operation's wire
// tag (16 bits) and a step or size (24 bits), which leaves bits 40-55 for
// the gang's space (gloo_view.h).
inline uint64_t slot(uint8_t prefix, uint32_t tag, uint32_t step) {
  return (uint64_t{prefix} << 56) | (uint64_t{tag & 0xffff} << 24) | (step & 0xffffff);
}

struct Frame {
  uint32_t magic;
  uint8_t channel;
  uint8_t algorithm;  // the algorithm the sender runs (gloo_dispatch.cc)
  uint16_t inline_len;
  core::OpSignature sig;  // what every rank must pass alike
  uint64_t to_you;        // payload bytes the sender sends the receiver
  uint64_t from_you;      // payload bytes the sender expects from the receiver
  uint8_t data[kInlineBytes];
};
static_assert(sizeof(Frame) == 136, "frames are 136 bytes on the wire");

// This rank's frame for `args` to a peer it sends `to_you` bytes and from
// which it expects `from_you` bytes.
Frame make_frame(const core::Operation& op, uint64_t to_you,
                 uint64_t from_you);

// Throws kMismatch naming both calls unless `theirs` (from rank `peer`)
// matches `mine` (what this rank sends that peer).
void check_frame(const Frame& mine, int me, const Frame& theirs, int peer);

// The unbound buffers of one backend that someone may wait on, so that
// abort() can wake every wait, now and to come: Gloo's public way to make a
// wait return (false) at once. Together with closing the pairs (which tells
// the peers) that is the whole of an abort, with no socket touched outside
// Gloo's own locks.
class Waits {
 public:
  void add(::gloo::transport::UnboundBuffer* b);
  void remove(::gloo::transport::UnboundBuffer* b);
  void abort();
  bool aborted();

 private:
  std::mutex mu_;
  std::set<::gloo::transport::UnboundBuffer*> live_;
  bool aborted_ = false;
};

// An unbound buffer registered with a backend's Waits for its lifetime.
class WaitableBuffer {
 public:
  WaitableBuffer(const std::shared_ptr<::gloo::Context>& ctx,
                 std::shared_ptr<Waits> waits, const void* data, size_t n);
  ~WaitableBuffer();
  WaitableBuffer(const WaitableBuffer&) = delete;
  WaitableBuffer& operator=(const WaitableBuffer&) = delete;
  ::gloo::transport::UnboundBuffer* get() const { return buffer_.get(); }
  ::gloo::transport::UnboundBuffer* operator->() const { return buffer_.get(); }

 private:
  std::shared_ptr<Waits> waits_;
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer_;
};

// Posted sends and receives, each waited for once, every wait bounded by
// one deadline. Gloo's false return (an aborted wait) is kAborted.
class Transfers {
 public:
  Transfers(std::shared_ptr<::gloo::Context> ctx, std::shared_ptr<Waits> waits,
            core::Clock::time_point deadline)
      : ctx_(std::move(ctx)), waits_(std::move(waits)), deadline_(deadline) {}
  // Closes the connections of the transfers never waited for (gloo_view.h).
  ~Transfers();
  Transfers(const Transfers&) = delete;
  Transfers& operator=(const Transfers&) = delete;

  // A buffer over [data, data + n) to post transfers on.
  ::gloo::transport::UnboundBuffer* buffer(const void* data, size_t n);
  void send(::gloo::transport::UnboundBuffer* b, int peer, uint64_t slot,
            size_t offset, size_t n);
  void recv(::gloo::transport::UnboundBuffer* b, int peer, uint64_t slot,
            size_t offset, size_t n);
  // Waits for everything posted so far. A timeout or a lost connection
  // names the rank the wait was for.
  void wait();
  // Waits for the one transfer posted on `b` (a buffer of its own), ahead
  // of the others.
  void wait_one(::gloo::transport::UnboundBuffer* b);
  // On the way to failing: gives the sends posted so far at most `most`
  // (never past the deadline) to leave, so that what this rank already
  // said reaches its peers before its connections close. Never throws.
  void flush_sends(std::chrono::milliseconds most) noexcept;

 private:
  struct Pending {
    ::gloo::transport::UnboundBuffer* buffer;
    bool is_send;
    int peer;
  };
  // Waits for one posted transfer; a timeout or a lost connection names
  // its peer.
  void wait_for(const Pending& p) const;
  std::chrono::milliseconds left(const std::vector<int>& awaited) const;
  [[noreturn]] void rethrow(const ::gloo::Exception& e, const std::vector<int>& awaited) const;

  std::shared_ptr<::gloo::Context> ctx_;
  std::shared_ptr<Waits> waits_;
  core::Clock::time_point deadline_;
  std::vector<std::unique_ptr<WaitableBuffer>> buffers_;
  // Every posted transfer not yet waited for.
  std::vector<Pending> pending_;
};

// Exchanges frames with every rank in `partners` (ranks, not this one):
// frames_out[i] goes to partners[i], frames_in[i] arrives from it, each then
// checked. Both vectors are as long as `partners`, so that an exchange with
// a few partners of a wide gang costs what those few do. `step` tells apart
// the exchanges of one operation that has several (below 256).
void exchange_frames(const std::shared_ptr<::gloo::Context>& ctx,
                     const std::shared_ptr<Waits>& waits,
                     core::Clock::time_point deadline, uint32_t tag,
                     const std::vector<int>& partners,
                     const std::vector<Frame>& frames_out,
                     std::vector<Frame>& frames_in, uint32_t step = 0);

// Frames that do not go both ways: frames_out[i] goes to to[i] and
// frames_in[j] arrives from from[j], each checked against `mine` the moment
// it arrives, in the order of `from` (which the caller chooses so that a
// frame that always comes is awaited before one that may not).
void route_frames(const std::shared_ptr<::gloo::Context>& ctx,
                  const std::shared_ptr<Waits>& waits, core::Clock::time_point deadline,
                  uint32_t tag, const std::vector<int>& to,
                  const std::vector<Frame>& frames_out, const std::vector<int>& from,
                  std::vector<Frame>& frames_in, const Frame& mine, uint32_t step = 0);

// "rank 3" or "ranks 1, 4", for messages.
Text rank_list(const std::vector<int>& ranks);

}  // namespace gang::backends::gloo_impl
