// The Gloo backend: CPU collectives over Gloo's TCP transport.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <vector>

#include "core/backend.h"

namespace gang::backends::gloo_impl {

class GlooBackend final : public core::Backend {
 public:
  // context is null for a gang of size 1, which needs no peers; sockets
  // are its connections (see gloo_sockets.h), shut down by abort().
  GlooBackend(const core::BackendConfig& config,
              std::shared_ptr<::gloo::transport::Device> device,
              std::shared_ptr<::gloo::rendezvous::Context> context,
              std::vector<ino_t> sockets);
  ~GlooBackend() override;

  const char* name() const override { return "gloo"; }
  bool supports(core::ReduceOp, core::DType) const override { return true; }
  void run(const core::CollectiveArgs& args, uint64_t seq,
           core::Clock::time_point deadline) override;
  void run_group(const std::vector<core::CollectiveArgs>& ops,
                 const std::vector<uint64_t>& seqs,
                 core::Clock::time_point deadline) override;
  void abort() noexcept override;

  const std::shared_ptr<::gloo::transport::Device>& device() const {
    return device_;
  }

 private:
  // Runs f, turning Gloo's exceptions into gang errors.
  template <typename F>
  void guarded(core::Clock::time_point deadline, F&& f);

  int rank_;
  int size_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::rendezvous::Context> context_;
  std::vector<ino_t> sockets_;
  std::atomic<bool> aborted_{false};
};

}  // namespace gang::backends::gloo_impl
