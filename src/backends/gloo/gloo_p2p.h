// Point-to-point sends and receives over Gloo's pairs.
#pragma once

#include <gloo/context.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backends/gloo/gloo_frames.h"
#include "core/backend.h"

namespace gang::backends::gloo_impl {

// Keeps receives from any peer in MPI's order on Gloo. Gloo's own matching
// gives a receive posted for one peer precedence over an earlier one from
// any peer, and a payload goes to the first receive posted on its slot. So,
// per channel and tag: a receive from a named peer is posted to Gloo only
// once no earlier receive from any peer still waits for its message (until
// then it is held back, and posted in order when they have all taken
// theirs); and receives from any peer post their payloads in the order
// they were posted (each once its frame named the sender).
class AnyOrder {
 public:
  using Key = uint64_t;  // channel and tag
  static Key key(int channel, int tag) {
    return (uint64_t(uint32_t(channel)) << 32) | uint32_t(tag);
  }

  // A receive from any peer with `key` is posted: its ticket.
  uint64_t any_posted(Key key);
  // Posts a named receive now (post()) or, while a receive from any peer
  // with `key` waits for its message, later, in order; the id lets its
  // work withdraw a post not yet made.
  void named(Key key, uint64_t id, std::function<void()> post);
  void withdraw(Key key, uint64_t id);
  // The receive with `ticket` has its frame: waits (until `until`) for the
  // receives from any peer posted before it to post their payloads, runs
  // post_payload, then releases the named receives held back once none is
  // left waiting. False if `until` passed first.
  bool framed(Key key, uint64_t ticket, const std::function<void()>& post_payload,
              std::chrono::steady_clock::time_point until);
  // The receive with `ticket` ended without its frame (failed, aborted).
  void gave_up(Key key, uint64_t ticket);
  uint64_t next_id() { return ++ids_; }

 private:
  struct State {
    uint64_t next_ticket = 0;
    std::deque<uint64_t> waiting;  // tickets without their payload posted, in order
    // Named receives held back, in order: id, the tickets issued before
    // it (those it must wait for), its post.
    struct Held {
      uint64_t id;
      uint64_t before;
      std::function<void()> post;
    };
    std::deque<Held> held;
  };
  void settle_locked(State& st, uint64_t ticket);
  void forget_if_idle_locked(std::map<Key, State>::iterator it);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, State> states_;
  std::atomic<uint64_t> ids_{0};
};

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
              std::shared_ptr<AnyOrder> order, const core::Operation& op);
  ~GlooP2PWork() override;

  bool test() override;
  bool wait(core::Clock::time_point until) override;

 private:
  void await();
  void post_frame_and_payload();
  void post_payload();
  void check_received_frame();
  bool outcome_locked();

  std::shared_ptr<::gloo::Context> ctx_;
  bool is_send_;
  bool any_;             // a receive from any peer
  int peer_;             // kAnySource until a receive from any peer has its frame
  int* source_;          // a receive from any peer: where its sender goes
  uint64_t payload_prefix_;
  int tag_;
  core::Channel channel_;
  core::DType dtype_;
  size_t count_;
  size_t bytes_;
  void* data_;
  core::Clock::time_point deadline_;
  std::shared_ptr<Waits> waits_;
  std::shared_ptr<AnyOrder> order_;
  AnyOrder::Key order_key_;
  uint64_t ticket_ = 0;     // a receive from any peer's place among them
  uint64_t order_id_ = 0;   // a named receive's, while it may be held back
  bool posted_ = false;     // a named receive: its transfers are posted (under mu_)
  std::exception_ptr post_error_;  // what Gloo threw posting them (under mu_)
  uint64_t frame_slot_;
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
