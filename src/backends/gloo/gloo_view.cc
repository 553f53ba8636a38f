#include "backends/gloo/gloo_view.h"

#include <gloo/common/error.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <atomic>

#include "base/error.h"

namespace gang::backends::gloo_impl {

namespace tcp = ::gloo::transport::tcp;

namespace {

// A buffer whose transfers travel in its gang's space.
class SpacedBuffer final : public FailableBuffer {
 public:
  // `members` is the view's, shared: a buffer of a wide gang copies none.
  SpacedBuffer(const std::shared_ptr<tcp::Context>& context, void* ptr, size_t size,
               uint64_t space, std::shared_ptr<Mesh> mesh,
               std::shared_ptr<const std::vector<int>> members)
      : FailableBuffer(context, ptr, size), space_(space << kSpaceShift),
        mesh_(std::move(mesh)), members_(std::move(members)) {}

  void send(int dst, uint64_t slot, size_t offset, size_t nbytes) override {
    tcp::UnboundBuffer::send(dst, spaced(slot), offset, nbytes);
  }
  void recv(int src, uint64_t slot, size_t offset, size_t nbytes) override {
    tcp::UnboundBuffer::recv(src, spaced(slot), offset, nbytes);
  }
  // From any of `srcs` (ranks of the view): registered with the mesh,
  // whose pairs look such receives up; waitRecv's rank is then a mesh
  // rank (View::view_rank turns it back).
  void recv(std::vector<int> srcs, uint64_t slot, size_t offset, size_t nbytes) override {
    if (nbytes == ::gloo::transport::UnboundBuffer::kUnspecifiedByteCount) {
      nbytes = size - offset;
    }
    std::vector<int> from;
    from.reserve(srcs.size());
    for (int r : srcs) {
      if (r < 0 || static_cast<size_t>(r) >= members_->size()) {
        GLOO_THROW_INVALID_OPERATION_EXCEPTION("rank ", r, " is not in a gang of ",
                                               members_->size());
      }
      from.push_back((*members_)[static_cast<size_t>(r)]);
    }
    mesh_->recv_from_any(this, spaced(slot), offset, nbytes, std::move(from));
  }

 private:
  uint64_t spaced(uint64_t slot) const {
    if ((slot & kSpaceMask) != 0) {
      GLOO_THROW_INVALID_OPERATION_EXCEPTION("slot ", slot, " does not leave room for a space");
    }
    return slot | space_;
  }

  const uint64_t space_;
  std::shared_ptr<Mesh> mesh_;
  std::shared_ptr<const std::vector<int>> members_;
};

}  // namespace

// The transport side of a view: its pairs are the mesh's, found by member.
class ViewTransport final : public tcp::Context {
 public:
  ViewTransport(std::shared_ptr<Mesh> mesh, std::shared_ptr<tcp::Device> device, int rank,
                std::vector<int> members, uint32_t space)
      : tcp::Context(std::move(device), rank, static_cast<int>(members.size())),
        mesh_(std::move(mesh)),
        members_(std::make_shared<const std::vector<int>>(std::move(members))),
        space_(space),
        used_(new std::atomic<uint32_t>[members_->size()]()) {}

  std::unique_ptr<::gloo::transport::Pair>& getPair(int peer) override {
    if (peer < 0 || peer >= size) {
      GLOO_THROW_INVALID_OPERATION_EXCEPTION("rank ", peer, " is not in a gang of ", size);
    }
    uint32_t generation = 0;
    auto& pair = mesh_->pair((*members_)[static_cast<size_t>(peer)], &generation);
    auto& used = used_[static_cast<size_t>(peer)];
    if (used.load(std::memory_order_relaxed) != generation) {
      used.store(generation, std::memory_order_relaxed);
    }
    return pair;
  }

  std::unique_ptr<::gloo::transport::Pair>& createPair(int) override {
    GLOO_THROW_INVALID_OPERATION_EXCEPTION("a gang view makes no pairs of its own");
  }

  std::unique_ptr<::gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr,
                                                                        size_t size) override {
    return std::make_unique<SpacedBuffer>(shared_from_this(), ptr, size, space_, mesh_,
                                          members_);
  }

  void fence(int peer) noexcept {
    if (peer < 0 || peer >= size || peer == rank) return;
    const uint32_t generation = used_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
    if (generation != 0) mesh_->fence((*members_)[static_cast<size_t>(peer)], generation);
  }

  bool broken(int peer) {
    return used_[static_cast<size_t>(peer)].load(std::memory_order_relaxed) != 0 &&
           mesh_->broken((*members_)[static_cast<size_t>(peer)]);
  }

 private:
  std::shared_ptr<Mesh> mesh_;
  std::shared_ptr<const std::vector<int>> members_;
  uint32_t space_;
  // Per rank of the gang: the generation of the connection it last used
  // (0: none yet).
  std::unique_ptr<std::atomic<uint32_t>[]> used_;
};

View::View(std::shared_ptr<Mesh> mesh, std::shared_ptr<::gloo::transport::Device> device,
           int rank, std::vector<int> members, uint32_t space)
    : ::gloo::Context(rank, static_cast<int>(members.size())),
      mesh_(std::move(mesh)),
      members_(members),
      space_(space) {
  auto tcp_device = std::dynamic_pointer_cast<tcp::Device>(device);
  if (!tcp_device) fail(Status::kInternal, "gloo: the device is not Gloo's TCP device");
  transport_ = std::make_shared<ViewTransport>(mesh_, std::move(tcp_device), rank,
                                               std::move(members), space);
  device_ = std::move(device);
  transportContext_ = transport_;
  if (mesh_->gangs.fetch_add(1) > 0) mesh_->shared.store(true);
}

View::~View() { mesh_->gangs.fetch_sub(1); }

int View::view_rank(int mesh_rank) const {
  for (size_t r = 0; r < members_.size(); ++r) {
    if (members_[r] == mesh_rank) return static_cast<int>(r);
  }
  return -1;
}

void View::fence(const std::vector<int>& peers) noexcept {
  for (int p : peers) transport_->fence(p);
}

std::vector<int> View::broken() {
  std::vector<int> peers;
  for (int p = 0; p < size; ++p) {
    if (p != rank && transport_->broken(p)) peers.push_back(p);
  }
  return peers;
}

View* as_view(::gloo::Context& context) { return dynamic_cast<View*>(&context); }

}  // namespace gang::backends::gloo_impl
