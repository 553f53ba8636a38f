#include "core/registry.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "core/plugin_loader.h"

namespace gang::core {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<BackendInfo> backends;
};

// A function-local static: registrars in other translation units run during
// static initialisation, in no particular order.
Registry& registry() {
  static Registry r;
  return r;
}

const char* device_name(DeviceType d) {
  return d == DeviceType::kCuda ? "CUDA" : "CPU";
}

bool serves(const BackendInfo& info, DeviceType device) {
  return std::find(info.devices.begin(), info.devices.end(), device) !=
         info.devices.end();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Modules this build of gang ships, as "name:device,name:device" (set by
// CMake, e.g. "nccl:cuda"): a missing one is then a module that was not
// installed (kUnavailable), not a name nothing answers to.
#ifndef GANG_SHIPPED_MODULES
#define GANG_SHIPPED_MODULES ""
#endif

// The shipped module that serves `device` or is called `name`, as "name", or
// "" if none.
std::string shipped_module(const std::string& name, DeviceType device) {
  const std::string list = GANG_SHIPPED_MODULES;
  size_t start = 0;
  while (start < list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    const size_t colon = item.find(':');
    const std::string module = item.substr(0, colon);
    const std::string dev = colon == std::string::npos ? "" : item.substr(colon + 1);
    if (module == name ||
        (name.empty() && dev == (device == DeviceType::kCuda ? "cuda" : "cpu"))) {
      return module;
    }
    start = end + 1;
  }
  return "";
}

std::string probe(const BackendInfo& info) {
  return info.probe ? info.probe() : std::string();
}

BackendInfo by_name(const std::string& name, DeviceType device) {
  std::optional<BackendInfo> found;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& b : r.backends) {
      if (b.name == name) found = b;
    }
  }
  if (!found) found = plugins::find_module(name);
  if (!found && !shipped_module(name, device).empty()) {
    fail(Status::kUnavailable, "gang_create: the ", name,
         " backend is the module libgang-", name,
         ".so, which is not installed in ", joined(plugins::search_dirs()),
         " (GANG_PLUGIN_PATH adds directories)");
  }
  if (!found) {
    fail(Status::kInvalidArgument, "gang_create: options.backend \"", name,
         "\" is unknown: no built-in backend has that name (this build has: ",
         joined(backend_names()), ") and no module libgang-", name,
         ".so is in ", joined(plugins::search_dirs()));
  }
  if (!serves(*found, device)) {
    fail(Status::kUnsupported, "gang_create: the ", name, " backend does not "
         "work on ", device_name(device), " buffers");
  }
  const std::string why = probe(*found);
  if (!why.empty()) {
    fail(Status::kUnavailable, "gang_create: the ", name,
         " backend is unavailable: ", why);
  }
  return *found;
}

}  // namespace

void register_backend(BackendInfo info) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.backends.push_back(std::move(info));
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& b : r.backends) names.push_back(b.name);
  std::sort(names.begin(), names.end());
  return names;
}

BackendInfo select_backend(const std::string& name, DeviceType device,
                           bool one_host) {
  if (!name.empty() && name != "auto") return by_name(name, device);
  const auto eligible = [&](const BackendInfo& b) {
    return b.priority >= 0 && serves(b, device) && (one_host || !b.one_host_only);
  };

  std::vector<BackendInfo> candidates;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& b : r.backends) {
      if (eligible(b)) candidates.push_back(b);
    }
  }
  for (auto& m : plugins::all_modules()) {
    if (eligible(m)) candidates.push_back(std::move(m));
  }
  // Highest priority first; built-ins before modules of equal priority.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const BackendInfo& a, const BackendInfo& b) {
                     return a.priority > b.priority;
                   });
  std::string reasons;
  for (const auto& c : candidates) {
    const std::string why = probe(c);
    if (why.empty()) return c;
    reasons += str_cat("; ", c.name, ": ", why);
  }
  const std::string module = shipped_module("", device);
  fail(Status::kUnavailable, "gang_create: no backend for ",
       device_name(device), " buffers is available in this process",
       candidates.empty()
           ? str_cat(" (none is built in, and no module in ",
                     joined(plugins::search_dirs()), " serves them",
                     module.empty() ? "" : str_cat("; the ", module,
                                                   " backend is the module libgang-",
                                                   module, ".so"),
                     ")")
           : reasons);
}

}  // namespace gang::core
