#include "core/backend.h"

#include "core/local_collective.h"

namespace gang::core {

bool CompositeWork::test() {
  while (done_ < parts_.size() && parts_[done_]->test()) ++done_;
  return done_ == parts_.size();
}

bool CompositeWork::wait(Clock::time_point until) {
  while (done_ < parts_.size()) {
    if (!parts_[done_]->wait(until)) return false;
    ++done_;
  }
  return true;
}

BackendWorkPtr CompositeWork::simplify(std::unique_ptr<CompositeWork> w) {
  if (w->parts_.empty()) return nullptr;
  if (w->parts_.size() == 1) return std::move(w->parts_.front());
  return w;
}

BackendWorkPtr Backend::post_group(const std::vector<Operation>& ops) {
  auto all = std::make_unique<CompositeWork>();
  for (const Operation& op : ops) all->add(post(op));
  return CompositeWork::simplify(std::move(all));
}

namespace {

bool computed_here(const Backend& backend, int size) {
  return size == 1 && backend.capabilities().host_memory;
}

}  // namespace

void post_alone(const Operation& op) { run_local(op.args, 0, 1); }

BackendWorkPtr post_group_to(Backend& backend, const std::vector<Operation>& ops, int size) {
  if (!computed_here(backend, size)) return backend.post_group(ops);
  for (const Operation& op : ops) run_local(op.args, 0, 1);
  return nullptr;
}

std::unique_ptr<Backend> Backend::split(const BackendConfig& /*config*/) {
  fail(Status::kUnsupported, name(), " splits by creating a new backend");
}

}  // namespace gang::core
