// The fake backend: one process standing in for one rank of a gang whose
// every rank holds this process's data. No traffic, no threads.
#include "base/error.h"
#include "core/backend.h"
#include "core/local_collective.h"
#include "core/registry.h"

namespace gang::backends {

namespace {

class FakeBackend final : public core::Backend {
 public:
  explicit FakeBackend(const core::BackendConfig& c)
      : rank_(c.rank), size_(c.size) {
    caps_.emulates_peers = true;
    caps_.uses_store_later = false;
  }

  const char* name() const override { return "fake"; }
  const core::Capabilities& capabilities() const override { return caps_; }
  bool supports(core::ReduceOp, core::DType) const override { return true; }

  core::BackendWorkPtr post(const core::Operation& op) override {
    core::run_local(op.args, rank_, size_);
    return nullptr;
  }

  void abort() noexcept override {}

 private:
  int rank_;
  int size_;
  core::Capabilities caps_;
};

core::BackendInfo fake_info() {
  core::BackendInfo info;
  info.name = "fake";
  info.devices = {core::DeviceType::kCpu, core::DeviceType::kCuda};
  info.priority = -1;  // by name only (gang_create_fake)
  info.needs_rendezvous = false;
  info.create = [](const core::BackendConfig& c) {
    return std::make_unique<FakeBackend>(c);
  };
  return info;
}

const core::BackendRegistrar kRegisterFake(fake_info());

}  // namespace

}  // namespace gang::backends
