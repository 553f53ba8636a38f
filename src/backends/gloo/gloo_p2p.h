// Point-to-point sends and receives over Gloo's pairs.
#pragma once

#include <gloo/context.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "backends/gloo/gloo_frames.h"
#include "core/backend.h"

namespace gang::backends::gloo_impl {

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
