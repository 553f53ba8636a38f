// The fake backend: one process standing in for one rank of a gang whose
// every rank holds this process's data. No traffic, no threads.
#include "core/backend.h"
#include "core/error.h"
#include "core/local_collective.h"
#include "core/registry.h"

namespace gang::backends {

namespace {

using core::Clock;
using core::CollectiveArgs;

class FakeBackend final : public core::Backend {
 public:
  explicit FakeBackend(const core::BackendConfig& c)
      : rank_(c.rank), size_(c.size) {}

  const char* name() const override { return "fake"; }
  bool supports(core::ReduceOp, core::DType) const override { return true; }
  bool emulates_peers() const override { return true; }

  void run(const CollectiveArgs& args, uint64_t, Clock::time_point) override {
    core::run_local(args, rank_, size_);
  }

  void run_group(const std::vector<CollectiveArgs>& ops,
                 const std::vector<uint64_t>&, Clock::time_point) override {
    for (const auto& op : ops) core::run_local(op, rank_, size_);
  }

  void abort() noexcept override {}

 private:
  int rank_;
  int size_;
};

std::unique_ptr<core::Backend> make_fake(const core::BackendConfig& c) {
  return std::make_unique<FakeBackend>(c);
}

const core::BackendRegistrar kRegisterFake("fake", make_fake);

}  // namespace

}  // namespace gang::backends
