#include "core/registry.h"

#include <map>
#include <mutex>

namespace gang::core {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

// A function-local static: registrars in other translation units run during
// static initialisation, in no particular order.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = factory;
}

BackendFactory find_backend(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.factories.find(name);
  return it == r.factories.end() ? nullptr : it->second;
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& kv : r.factories) names.push_back(kv.first);
  return names;
}

}  // namespace gang::core
