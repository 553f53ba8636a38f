#include "core/backend.h"

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

std::unique_ptr<Backend> Backend::split(const BackendConfig& /*config*/) {
  fail(Status::kUnsupported, name(), " splits by creating a new backend");
}

}  // namespace gang::core
