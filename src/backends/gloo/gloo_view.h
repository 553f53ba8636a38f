// A gang's view of a mesh (gloo_pairs.h): a Gloo context whose ranks are
// the gang's, whose pairs are the mesh's connections with the gang's
// members, and whose slots carry the gang's space, so that the transfers of
// gangs sharing a connection never meet.
//
// Every gloo gang works through a view. By default each gang has a mesh of
// its own; with GANG_GLOO_SHARED_CONNECTIONS=1 a gang split from a gloo gang
// shares its parent's mesh, so a process holds one connection with each
// process of its lineage however many sub-gangs they share. The price is
// separation: a sharing gang that fails in the middle of an operation
// closes the connections that operation used (below), so an operation of
// another gang in flight between the same two ranks at that moment fails
// too; later operations connect again. A gang alone on its mesh that fails
// or aborts closes all of it, as every gang did before sharing.
//
// A slot is 64 bits: the top byte says the kind of traffic
// (gloo_run.h), the next 16 bits the gang's space, the low 40 bits
// the rest. A root gang's space is 0; a gang split from it takes the next
// number from a counter in the store the root met in, so no two gangs of a
// mesh share one. A mesh whose spaces ran out gives a new gang connections
// of its own.
//
// Gloo closes every pair of a context when a wait on it times out; a view
// has no pairs of its own, so its timeouts close nothing. The gang closes
// what it used instead (fence): the connections its abandoned transfers
// were posted on; and a gang whose mesh never served another closes all of
// it on abort (GlooBackend::abort).
#pragma once

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/gloo/gloo_pairs.h"

namespace gang::backends::gloo_impl {

constexpr int kSpaceShift = 40;
constexpr uint64_t kSpaceMask = uint64_t{0xffff} << kSpaceShift;
constexpr uint32_t kLastSpace = 0xffff;

class ViewTransport;

class View final : public ::gloo::Context {
 public:
  // Rank `rank` of a gang whose rank r is mesh rank members[r].
  View(std::shared_ptr<Mesh> mesh, std::shared_ptr<::gloo::transport::Device> device, int rank,
       std::vector<int> members, uint32_t space);
  ~View() override;

  const std::shared_ptr<Mesh>& mesh() const { return mesh_; }
  uint32_t space() const { return space_; }

  // Closes the connections this gang used with `peers` (its ranks); the
  // next use by any gang of the mesh connects again. From any thread.
  void fence(const std::vector<int>& peers) noexcept;
  // The ranks whose connection with this one failed, in rank order.
  std::vector<int> broken();
  // This gang's rank of mesh rank `mesh_rank` (a receive from any rank
  // reports the mesh's), or -1.
  int view_rank(int mesh_rank) const;

 private:
  std::shared_ptr<Mesh> mesh_;
  std::vector<int> members_;
  std::shared_ptr<ViewTransport> transport_;
  uint32_t space_;
};

// The view `context` is, or null.
View* as_view(::gloo::Context& context);

}  // namespace gang::backends::gloo_impl
