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

#include "core/backend.h"

namespace gang::backends::gloo_impl {

// The Gloo tag of an operation: its sequence number, with the channel in
// the top bits so the user's collectives, the fingerprints and the core's
// control traffic never share a slot.
uint32_t wire_tag(const core::Operation& op);

// Runs one collective (not send/recv); timeout bounds each wait.
void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const core::CollectiveArgs& args, uint32_t tag,
                    std::chrono::milliseconds timeout);

// Turns a Gloo exception into a gang error (never returns): after abort the
// broken connections are our own doing (kAborted); at the deadline it is
// kTimeout; otherwise a peer is gone (kPeerLost).
[[noreturn]] void rethrow_gloo(const ::gloo::Exception& e,
                               core::Clock::time_point deadline, bool aborted);

// A send or receive posted to Gloo's pair. Gloo can only wait for it, and
// a wait that times out tears down every connection of the context, so a
// poll (test(), or a wait shorter than the operation's deadline) hands the
// wait to a thread of its own, started on the first poll; a wait to the
// deadline waits on the caller's thread.
class GlooP2PWork final : public core::BackendWork {
 public:
  GlooP2PWork(std::unique_ptr<::gloo::transport::UnboundBuffer> buffer,
              bool is_send, core::Clock::time_point deadline,
              std::shared_ptr<std::atomic<bool>> aborted);
  ~GlooP2PWork() override;

  bool test() override;
  bool wait(core::Clock::time_point until) override;

 private:
  // Waits for Gloo up to the deadline and records the outcome.
  void await();
  // Lock held: the outcome, or false while running.
  bool outcome_locked();

  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer_;
  bool is_send_;
  core::Clock::time_point deadline_;
  std::shared_ptr<std::atomic<bool>> aborted_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool claimed_ = false;  // someone waits for Gloo (a caller or waiter_)
  bool done_ = false;
  Status status_ = Status::kOk;
  std::string what_;
  std::thread waiter_;
};

// Posts a send or receive to Gloo (null when there are no bytes to move).
core::BackendWorkPtr post_p2p(const std::shared_ptr<::gloo::Context>& ctx,
                              const core::Operation& op,
                              std::shared_ptr<std::atomic<bool>> aborted);

}  // namespace gang::backends::gloo_impl
