#include "backends/gloo/gloo_backend.h"

#include <gloo/common/error.h>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_pairs.h"
#include "base/descriptors.h"
#include "base/error.h"
#include "core/local_collective.h"
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
                         std::shared_ptr<::gloo::rendezvous::Context> context,
                         Algorithm algorithm)
    : rank_(config.rank),
      size_(config.size),
      device_(std::move(device)),
      context_(std::move(context)),
      waits_(std::make_shared<Waits>()),
      algorithm_(algorithm) {
  caps_.uses_store_later = false;  // the addresses are read at creation
}

GlooBackend::~GlooBackend() = default;

core::BackendWorkPtr GlooBackend::post(const core::Operation& op) {
  if (!context_) {
    core::run_local(op.args, rank_, size_);
    return nullptr;
  }
  if (waits_->aborted()) fail(Status::kAborted, "the gang was aborted");
  if (core::is_p2p(op.args.kind)) {
    return std::make_unique<GlooP2PWork>(context_, waits_, op);
  }
  if (Clock::now() >= op.deadline) {
    fail(Status::kTimeout,
         "the gang's timeout passed before the operation started");
  }
  try {
    run_collective(context_, waits_, scratch_[static_cast<size_t>(op.channel)],
                   algorithm_, op);
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, op.deadline, waits_->aborted(), *context_);
  }
  return nullptr;
}

void GlooBackend::abort() noexcept {
  if (!context_ || waits_->aborted()) return;
  try {
    // Local waits end at once; closing each pair (under its own lock, with
    // no linger) tells the peers, whose operations with this rank fail.
    waits_->abort();
    close_mesh(*context_);
  } catch (...) {
    // Best effort: a pair may be gone already.
  }
}

namespace {

std::unique_ptr<core::Backend> make_gloo(const core::BackendConfig& c) {
  if (c.device_type != core::DeviceType::kCpu) {
    fail(Status::kUnsupported,
         "gang_create: the gloo backend works on CPU buffers only");
  }
  // Read once, before connecting: a bad value fails at once.
  const Algorithm algorithm = algorithm_from_env();
  std::shared_ptr<::gloo::transport::Device> device;
  if (const auto* parent = dynamic_cast<const GlooBackend*>(c.parent)) {
    device = parent->device();
  }
  if (c.size == 1)
    return std::make_unique<GlooBackend>(c, device, nullptr, algorithm);
  if (!c.store)
    fail(Status::kInternal, "gloo: a gang of size ", c.size, " has no store");
  if (!device) device = make_device(c.store->host());

  // Connecting counts against the creation's deadline; operations pass
  // their own timeouts.
  const auto left = std::chrono::duration_cast<Millis>(c.deadline - Clock::now());
  std::shared_ptr<::gloo::rendezvous::Context> context;
  try {
    context = connect_mesh(*c.store, device, c.rank, c.size, c.secret,
                           std::max(Millis(1), std::min(c.timeout, left)), c.timeout);
  } catch (const ::gloo::Exception& e) {
    const std::string what = e.what();
    if (std::string why; base::out_of_descriptors(&why)) {
      fail(Status::kSystem, "gang_create: connecting rank ", c.rank, " to its peers: ", why,
           ": ", what);
    }
    fail(what.find("timeout") != std::string::npos ||
                 what.find("Timed out") != std::string::npos
             ? Status::kTimeout
             : Status::kPeerLost,
         "gang_create: connecting rank ", c.rank, " to its ", c.size - 1,
         " peers failed: ", what);
  }
  context->setTimeout(c.timeout);
  return std::make_unique<GlooBackend>(c, std::move(device), std::move(context),
                                       algorithm);
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
