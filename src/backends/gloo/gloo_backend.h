// The Gloo backend: CPU collectives over Gloo's TCP transport. Collectives
// run inside post() on the posting thread (a synchronous backend: the hot
// path hands nothing to another thread); sends and receives are posted to
// Gloo's pairs at once and complete through a GlooP2PWork.
#pragma once

#include <gloo/transport/device.h>

#include <atomic>
#include <memory>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_frames.h"
#include "backends/gloo/gloo_p2p.h"
#include "backends/gloo/gloo_view.h"
#include "core/backend.h"

namespace gang::backends::gloo_impl {

class GlooBackend final : public core::Backend {
 public:
  // view is null for a gang of size 1, which needs no peers.
  GlooBackend(const core::BackendConfig& config,
              std::shared_ptr<::gloo::transport::Device> device,
              std::shared_ptr<View> view, Algorithm algorithm);
  ~GlooBackend() override;

  const char* name() const override { return "gloo"; }
  const core::Capabilities& capabilities() const override { return caps_; }
  bool supports(core::ReduceOp, core::DType) const override { return true; }
  core::BackendWorkPtr post(const core::Operation& op) override;
  void abort() noexcept override;

  const std::shared_ptr<::gloo::transport::Device>& device() const {
    return device_;
  }
  // The connections this gang uses, shared with the gangs split from it;
  // null for a gang of size 1.
  std::shared_ptr<Mesh> mesh() const { return view_ ? view_->mesh() : nullptr; }

 private:
  int rank_;
  int size_;
  core::Capabilities caps_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<View> view_;
  // Every buffer someone may wait on; shared with the point-to-point works,
  // which may outlive the backend.
  std::shared_ptr<Waits> waits_;
  // The order of receives from any peer (gloo_p2p.h); shared likewise.
  std::shared_ptr<AnyOrder> any_order_ = std::make_shared<AnyOrder>();
  Scratch scratch_[3];  // per core::Channel
  Algorithm algorithm_;
};

}  // namespace gang::backends::gloo_impl
