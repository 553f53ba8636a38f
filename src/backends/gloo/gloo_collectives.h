// Each gang operation expressed with Gloo's algorithms and unbound buffers.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <memory>

#include "core/collective.h"

namespace gang::backends::gloo_impl {

// Runs one collective (not send/recv). `tag` tells concurrent operations
// apart on the wire; timeout bounds each wait.
void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const core::CollectiveArgs& args, uint32_t tag,
                    std::chrono::milliseconds timeout);

// Point-to-point: post() starts a send or recv and returns its buffer;
// finish() waits for it.
struct PostedP2P {
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
  bool is_send = false;
};
PostedP2P post_p2p(const std::shared_ptr<::gloo::Context>& ctx,
                   const core::CollectiveArgs& args);
void finish_p2p(PostedP2P& posted, std::chrono::milliseconds timeout);

}  // namespace gang::backends::gloo_impl
