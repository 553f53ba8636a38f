#include "backends/gloo/gloo_errors.h"

#include <string>
#include <vector>

#include "backends/gloo/gloo_frames.h"
#include "backends/gloo/gloo_pairs.h"
#include "backends/gloo/gloo_view.h"
#include "base/deadline.h"
#include "base/descriptors.h"
#include "base/error.h"
#include "core/collective.h"

namespace gang::backends::gloo_impl {

void rethrow_gloo(const ::gloo::Exception& e, core::Clock::time_point deadline,
                  bool aborted, ::gloo::Context& context, int peer) {
  if (aborted) fail(Status::kAborted, "the gang was aborted");
  const std::string what = e.what();
  // A connection that could not be made (or taken) for want of descriptors
  // is this process's limit, not a lost or late peer.
  if (std::string why; base::out_of_descriptors(&why)) fail(Status::kSystem, why, ": ", what);
  // Gloo reports a timeout and a broken connection with the same exception
  // type; the deadline tells them apart.
  if (base::at_deadline(deadline) || dynamic_cast<const ConnectTimeout*>(&e) != nullptr) {
    throw core::timed_out(peer >= 0 ? text(rank_list({peer}), " (", what, ")")
                                    : text("the other ranks (", what, ")"));
  }
  View* view = as_view(context);
  const std::vector<int> lost =
      peer >= 0 ? std::vector<int>{peer} : view != nullptr ? view->broken() : std::vector<int>{};
  if (lost.empty()) fail(Status::kPeerLost, "lost a peer: ", what);
  throw core::peers_gone(lost, text("lost the connection: ", what));
}

}  // namespace gang::backends::gloo_impl
