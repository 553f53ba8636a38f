#include "backends/gloo/gloo_backend.h"

#include <gloo/common/error.h>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_device.h"
#include "backends/gloo/gloo_sockets.h"
#include "backends/gloo/gloo_store.h"
#include "core/error.h"
#include "core/local_collective.h"
#include "core/registry.h"

namespace gang::backends::gloo_impl {

namespace {

using core::Clock;
using core::CollectiveArgs;
using core::OpKind;
using Millis = std::chrono::milliseconds;

Millis remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  if (left.count() <= 0) {
    fail(Status::kTimeout,
         "the gang's timeout passed before the operation started");
  }
  return left;
}

}  // namespace

GlooBackend::GlooBackend(const core::BackendConfig& config,
                         std::shared_ptr<::gloo::transport::Device> device,
                         std::shared_ptr<::gloo::rendezvous::Context> context,
                         std::vector<ino_t> sockets)
    : rank_(config.rank),
      size_(config.size),
      device_(std::move(device)),
      context_(std::move(context)),
      sockets_(std::move(sockets)) {}

GlooBackend::~GlooBackend() = default;

template <typename F>
void GlooBackend::guarded(Clock::time_point deadline, F&& f) {
  if (aborted_.load()) fail(Status::kAborted, "the gang was aborted");
  try {
    f(remaining(deadline));
  } catch (const ::gloo::Exception& e) {
    // After abort() the broken connections are our own doing.
    if (aborted_.load()) fail(Status::kAborted, "the gang was aborted");
    const std::string what = e.what();
    // Gloo reports a timeout and a broken connection with the same
    // exception type; the deadline tells them apart.
    if (Clock::now() >= deadline - Millis(50) ||
        what.find("Timed out") != std::string::npos) {
      fail(Status::kTimeout, "timed out: ", what);
    }
    fail(Status::kPeerLost, "lost a peer: ", what);
  }
}

void GlooBackend::run(const CollectiveArgs& args, uint64_t seq,
                      Clock::time_point deadline) {
  if (!context_) {
    core::run_local(args, rank_, size_);
    return;
  }
  guarded(deadline, [&](Millis timeout) {
    if (args.kind == OpKind::kSend || args.kind == OpKind::kRecv) {
      PostedP2P posted = post_p2p(context_, args);
      finish_p2p(posted, timeout);
    } else {
      run_collective(context_, args, static_cast<uint32_t>(seq), timeout);
    }
  });
}

void GlooBackend::run_group(const std::vector<CollectiveArgs>& ops,
                            const std::vector<uint64_t>& seqs,
                            Clock::time_point deadline) {
  if (!context_) {
    for (const auto& op : ops) core::run_local(op, rank_, size_);
    return;
  }
  guarded(deadline, [&](Millis timeout) {
    // Post every transfer first so both sides of an exchange can send
    // before they receive; collectives in the group run in order meanwhile.
    std::vector<PostedP2P> posted;
    for (const auto& op : ops) {
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        posted.push_back(post_p2p(context_, op));
      }
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& op = ops[i];
      if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) {
        run_collective(context_, op, static_cast<uint32_t>(seqs[i]), timeout);
      }
    }
    for (auto& p : posted) finish_p2p(p, timeout);
  });
}

void GlooBackend::abort() noexcept {
  if (aborted_.exchange(true) || !context_) return;
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

const core::BackendRegistrar kRegisterGloo("gloo", make_gloo);

}  // namespace

}  // namespace gang::backends::gloo_impl
