#include "backends/gloo/gloo_backend.h"

#include <gloo/common/error.h>

#include <cstdlib>
#include <cstring>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_errors.h"
#include "backends/gloo/gloo_p2p.h"
#include "backends/gloo/gloo_pairs.h"
#include "base/big_endian.h"
#include "base/env.h"
#include "base/deadline.h"
#include "base/descriptors.h"
#include "base/error.h"
#include "base/text.h"
#include "core/registry.h"
#include "store/store.h"

namespace gang::backends::gloo_impl {

namespace {

using core::Clock;
using core::OpKind;
using Millis = std::chrono::milliseconds;

}  // namespace

GlooBackend::GlooBackend(const core::BackendConfig& config,
                         std::shared_ptr<::gloo::transport::Device> device,
                         std::shared_ptr<View> view, Algorithm algorithm)
    : rank_(config.rank),
      size_(config.size),
      device_(std::move(device)),
      view_(std::move(view)),
      waits_(std::make_shared<Waits>()),
      algorithm_(algorithm) {
  caps_.uses_store_later = false;  // addresses: at creation, or lasting_store
  caps_.any_source = true;         // gloo_p2p.cc
}

GlooBackend::~GlooBackend() = default;

core::BackendWorkPtr GlooBackend::post(const core::Operation& op) {
  // A gang of one never posts here: the core computes its operations.
  if (!view_) fail(Status::kInternal, "gloo: an operation of a gang of one reached the backend");
  if (waits_->aborted()) fail(Status::kAborted, "the gang was aborted");
  if (core::is_p2p(op.args.kind)) {
    return std::make_unique<GlooP2PWork>(view_, waits_, any_order_, op);
  }
  if (Clock::now() >= op.deadline) {
    throw core::timed_out(text("the other ranks (the deadline passed before the operation began)"));
  }
  try {
    run_collective(view_, waits_, scratch_[static_cast<size_t>(op.channel)],
                   algorithm_, op);
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, op.deadline, waits_->aborted(), *view_);
  }
  return nullptr;
}

void GlooBackend::abort() noexcept {
  if (!view_ || waits_->aborted()) return;
  try {
    // Local waits end at once, and the operations they belong to close
    // the connections of their unfinished transfers, which tells those
    // peers. A gang whose connections never served another closes every
    // one (under its own lock, with no linger) and stops taking new ones,
    // so every peer learns at once; one that shares them leaves them to
    // the other gangs, and its peers learn from the failure notice, or at
    // their timeout.
    waits_->abort();
    if (!view_->mesh()->shared.load()) view_->mesh()->close();
  } catch (...) {
    // Best effort: a pair may be gone already.
  }
}

namespace {

uint32_t get_u32(const store::Bytes& b, size_t at) { return base::get_be32(&b[at]); }

void put_u32(store::Bytes& b, uint32_t v) {
  b.resize(b.size() + 4);
  base::put_be32(&b[b.size() - 4], v);
}

// A gang split from one whose connections are `mesh`'s: its ranks say
// which mesh ranks they are, and rank 0 draws the gang's space and
// publishes both (2N + 1 store operations, as connecting would take). Null
// when the mesh has no space left: the gang then connects on its own.
std::shared_ptr<View> share_mesh(const core::BackendConfig& c, const std::shared_ptr<Mesh>& mesh,
                                 std::shared_ptr<::gloo::transport::Device> device,
                                 Millis timeout) {
  store::Store& store = *c.store;
  const Clock::time_point deadline = base::deadline_after(timeout);
  const auto left = [&] {
    return std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
  };
  const size_t n = static_cast<size_t>(c.size);
  store::Bytes shared;
  if (c.rank == 0) {
    const int64_t drawn = mesh->store().add("gloo/spaces", 1);
    const uint32_t space = drawn > 0 && drawn <= kLastSpace ? static_cast<uint32_t>(drawn) : 0;
    put_u32(shared, space);
    put_u32(shared, static_cast<uint32_t>(mesh->mesh_rank()));
    std::vector<std::string> keys;
    for (int peer = 1; peer < c.size; ++peer) keys.push_back(str_cat("m", peer));
    const std::vector<store::Bytes> places = store.get_all(keys, left());
    for (int peer = 1; peer < c.size; ++peer) {
      const store::Bytes& theirs = places[static_cast<size_t>(peer - 1)];
      if (theirs.size() != 4) {
        fail(Status::kPeerLost, "gang_create: rank ", peer, " published ", theirs.size(),
             " bytes where rank 0 expects its 4-byte place in the shared connections");
      }
      shared.insert(shared.end(), theirs.begin(), theirs.end());
    }
    store.set("mall", shared);
  } else {
    store::Bytes mine;
    put_u32(mine, static_cast<uint32_t>(mesh->mesh_rank()));
    store.set(str_cat("m", c.rank), mine);
    shared = store.get("mall", left());
    if (shared.size() != 4 * (n + 1)) {
      fail(Status::kPeerLost, "gang_create: rank 0 published ", shared.size(),
           " bytes of shared connections where rank ", c.rank, " expects ", 4 * (n + 1));
    }
  }
  const uint32_t space = get_u32(shared, 0);
  if (space == 0) return nullptr;
  std::vector<int> members(n);
  std::vector<bool> seen(static_cast<size_t>(mesh->mesh_size()), false);
  for (size_t r = 0; r < n; ++r) {
    const uint32_t m = get_u32(shared, 4 * (r + 1));
    if (m >= seen.size() || seen[m]) {
      fail(Status::kInternal, "gang_create: rank ", r, " of a gang split from a gloo gang of ",
           seen.size(), " ranks says it is rank ", m, " of that gang");
    }
    seen[m] = true;
    members[r] = static_cast<int>(m);
  }
  if (members[static_cast<size_t>(c.rank)] != mesh->mesh_rank()) {
    fail(Status::kInternal, "gang_create: rank 0 placed rank ", c.rank, " at ",
         members[static_cast<size_t>(c.rank)], " of the shared connections, not ",
         mesh->mesh_rank());
  }
  return std::make_shared<View>(mesh, std::move(device), c.rank, std::move(members), space);
}

// Whether gangs split from a gloo gang share its connections
// (GANG_GLOO_SHARED_CONNECTIONS=1) or open their own (0, the default): the
// sharing gangs' failures are not as separate (gloo_view.h).
bool shared_connections_from_env() {
  const char* v = base::env("GANG_GLOO_SHARED_CONNECTIONS");
  if (v == nullptr || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  fail(Status::kInvalidArgument, "GANG_GLOO_SHARED_CONNECTIONS is \"", v,
       "\": it must be 0 (each gang opens its own connections) or 1 (gangs split from a "
       "gloo gang share its connections)");
}

std::unique_ptr<core::Backend> make_gloo(const core::BackendConfig& c) {
  // Read once, before connecting: a bad value fails at once.
  const Algorithm algorithm = algorithm_from_env();
  const bool share = shared_connections_from_env();
  std::shared_ptr<::gloo::transport::Device> device;
  std::shared_ptr<Mesh> parent_mesh;
  if (const auto* parent = dynamic_cast<const GlooBackend*>(c.parent)) {
    device = parent->device();
    if (share) parent_mesh = parent->mesh();
    // Its addresses go with the gang that made it (gloo_pairs.h).
    if (parent_mesh && parent_mesh->reads_on_first_use()) parent_mesh = nullptr;
  }
  if (c.size == 1)
    return std::make_unique<GlooBackend>(c, device, nullptr, algorithm);
  if (!c.store)
    fail(Status::kInternal, "gloo: a gang of size ", c.size, " has no store");
  if (!device) device = make_device(c.store->host());

  // Connecting counts against the creation's deadline; operations pass
  // their own timeouts.
  const auto left = std::chrono::duration_cast<Millis>(c.deadline - Clock::now());
  const Millis timeout = std::max(Millis(1), std::min(c.timeout, left));
  std::shared_ptr<View> view;
  try {
    if (parent_mesh) view = share_mesh(c, parent_mesh, device, timeout);
    if (!view) {
      auto mesh = connect_mesh(c.store, device, c.rank, c.size, c.secret, timeout, c.timeout,
                               c.seldom_used ? c.lasting_store : nullptr);
      std::vector<int> members(static_cast<size_t>(c.size));
      for (int r = 0; r < c.size; ++r) members[static_cast<size_t>(r)] = r;
      view = std::make_shared<View>(std::move(mesh), device, c.rank, std::move(members), 0);
    }
  } catch (const ::gloo::Exception& e) {
    const std::string what = e.what();
    if (std::string why; base::out_of_descriptors(&why)) {
      fail(Status::kSystem, "gang_create: connecting rank ", c.rank, " to its peers: ", why,
           ": ", what);
    }
    fail(base::at_deadline(c.deadline) || dynamic_cast<const ConnectTimeout*>(&e) != nullptr
             ? Status::kTimeout
             : Status::kPeerLost,
         "gang_create: connecting rank ", c.rank, " to its ", c.size - 1,
         " peers failed: ", what);
  }
  view->setTimeout(c.timeout);
  return std::make_unique<GlooBackend>(c, std::move(device), std::move(view), algorithm);
}

core::BackendInfo gloo_info() {
  core::BackendInfo info;
  info.name = "gloo";
  info.devices = {core::DeviceType::kCpu};
  info.priority = 10;
  info.create = make_gloo;
  return info;
}

const core::BackendRegistrar kRegisterGloo(gloo_info());

}  // namespace

}  // namespace gang::backends::gloo_impl
