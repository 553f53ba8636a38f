// Gloo's exceptions in gang's words.
#pragma once

#include <gloo/common/error.h>
#include <gloo/context.h>

#include "core/backend.h"

namespace gang::backends::gloo_impl {

// Turns a Gloo exception into a gang error (never returns): after abort the
// broken connections are our own doing (kAborted); at the deadline it is
// kTimeout; otherwise a peer is gone (kPeerLost).
// A lost peer is named: `peer` when the operation had one, else those whose
// connection with this rank `context` sees broken.
[[noreturn]] void rethrow_gloo(const ::gloo::Exception& e,
                               core::Clock::time_point deadline, bool aborted,
                               ::gloo::Context& context, int peer = -1);

}  // namespace gang::backends::gloo_impl
