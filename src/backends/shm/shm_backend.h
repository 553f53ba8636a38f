// The shm backend: CPU collectives and point-to-point among ranks of one
// host through one shared segment (shm_segment.h). Collectives run
// synchronously on the posting thread; sends and receives are posted at
// issue and matched by (peer, tag) (shm_p2p.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "backends/shm/shm_collectives.h"
#include "backends/shm/shm_p2p.h"
#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_wait.h"
#include "core/backend.h"

namespace gang::backends::shm_impl {

class ShmBackend final : public core::Backend {
 public:
  ShmBackend(const core::BackendConfig& config, std::shared_ptr<Segment> segment);
  ~ShmBackend() override;

  const char* name() const override { return "shm"; }
  const core::Capabilities& capabilities() const override { return caps_; }
  bool supports(core::ReduceOp, core::DType) const override { return true; }
  core::BackendWorkPtr post(const core::Operation& op) override;
  void abort() noexcept override;

 private:
  // Marks the gang failed in the segment, for `why`, and wakes every waiter.
  void fail_everyone(const Error& why) noexcept;

  int rank_;
  int size_;
  core::Capabilities caps_;
  // Null for a gang of one. Shared with the point-to-point works, which may
  // outlive the backend.
  std::shared_ptr<Segment> segment_;
  std::shared_ptr<Waiter> waiter_;
  std::shared_ptr<P2PEngine> p2p_;
  std::mutex channel_mu_[kChannels];  // one operation per channel at a time
  ChannelState channels_[kChannels];  // per channel (shm_collectives.h)
};

}  // namespace gang::backends::shm_impl
