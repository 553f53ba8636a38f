#include "backends/gloo/gloo_backend.h"

#include <gloo/common/error.h>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_sockets.h"
#include "backends/gloo/gloo_store.h"
#include "base/error.h"
#include "core/local_collective.h"
#include "core/registry.h"

namespace gang::backends::gloo_impl {

namespace {

using core::Clock;
using core::OpKind;
using Millis = std::chrono::milliseconds;

}  // namespace

GlooBackend::GlooBackend(const core::BackendConfig& config,
                         std::shared_ptr<::gloo::transport::Device> device,
                         std::shared_ptr<::gloo::rendezvous::Context> context,
                         std::vector<ino_t> sockets)
    : rank_(config.rank),
      size_(config.size),
      device_(std::move(device)),
      context_(std::move(context)),
      sockets_(std::move(sockets)),
      aborted_(std::make_shared<std::atomic<bool>>(false)) {}

GlooBackend::~GlooBackend() = default;

core::BackendWorkPtr GlooBackend::post(const core::Operation& op) {
  if (!context_) {
    core::run_local(op.args, rank_, size_);
    return nullptr;
  }
  if (aborted_->load()) fail(Status::kAborted, "the gang was aborted");
  if (core::is_p2p(op.args.kind)) {
    return std::make_unique<GlooP2PWork>(context_, op, aborted_);
  }
  if (Clock::now() >= op.deadline) {
    fail(Status::kTimeout,
         "the gang's timeout passed before the operation started");
  }
  try {
    run_collective(context_, op);
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, op.deadline, aborted_->load());
  }
  return nullptr;
}

void GlooBackend::abort() noexcept {
  if (aborted_->exchange(true) || !context_) return;
  try {
    shutdown_sockets(sockets_);
  } catch (...) {
    // Best effort: the pairs may already be closed.
  }
}

namespace {

std::unique_ptr<core::Backend> make_gloo(const core::BackendConfig& c) {
  if (c.device_type != core::DeviceType::kCpu) {
    fail(Status::kUnsupported,
         "gang_create: the gloo backend works on CPU buffers only");
  }
  std::shared_ptr<::gloo::transport::Device> device;
  if (const auto* parent = dynamic_cast<const GlooBackend*>(c.parent)) {
    device = parent->device();
  }
  if (c.size == 1)
    return std::make_unique<GlooBackend>(c, device, nullptr,
                                         std::vector<ino_t>{});
  if (!c.store)
    fail(Status::kInternal, "gloo: a gang of size ", c.size, " has no store");
  if (!device) device = make_device(c.store->host());

  auto context = std::make_shared<::gloo::rendezvous::Context>(c.rank, c.size);
  context->setTimeout(c.timeout);
  GlooStore store(c.store);
  const std::vector<ino_t> before = socket_inodes();
  try {
    context->connectFullMesh(store, device);
  } catch (const ::gloo::Exception& e) {
    const std::string what = e.what();
    fail(what.find("timeout") != std::string::npos ||
                 what.find("Timed out") != std::string::npos
             ? Status::kTimeout
             : Status::kPeerLost,
         "gang_create: connecting rank ", c.rank, " to its ", c.size - 1,
         " peers failed: ", what);
  }
  std::vector<ino_t> sockets = context_sockets(*context, before);
  return std::make_unique<GlooBackend>(c, std::move(device), std::move(context),
                                       std::move(sockets));
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
