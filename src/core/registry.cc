#include "core/registry.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include "base/error.h"
#include <set>

namespace gang::core {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<BackendInfo> backends;
  std::vector<BackendSource> sources;
  Composer composer;
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

std::vector<BackendSource> sources() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.sources;
}

// Where the sources looked, for messages.
std::string places() {
  std::vector<std::string> all;
  for (const auto& s : sources()) {
    for (auto& p : s.places()) all.push_back(std::move(p));
  }
  return joined(all);
}

std::string shipped(const std::string& name, DeviceType device) {
  for (const auto& s : sources()) {
    std::string module = s.shipped(name, device);
    if (!module.empty()) return module;
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
  for (const auto& source : sources()) {
    if (!found) found = source.find(name);
  }
  if (!found && !shipped(name, device).empty()) {
    fail(Status::kUnavailable, "gang_create: the ", name,
         " backend is the module libgang-", name,
         ".so, which is not installed in ", places(),
         " (GANG_PLUGIN_PATH adds directories)");
  }
  if (!found) {
    fail(Status::kInvalidArgument, "gang_create: options.backend \"", name,
         "\" is unknown: no built-in backend has that name (this build has: ",
         joined(backend_names()), ") and no module libgang-", name,
         ".so is in ", places());
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

// The backend of highest priority for `device` (or the one called `name`).
BackendInfo select(const std::string& name, DeviceType device, bool one_host) {
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
  for (const auto& source : sources()) {
    for (auto& m : source.all()) {
      if (eligible(m)) candidates.push_back(std::move(m));
    }
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
  const std::string module = shipped("", device);
  fail(Status::kUnavailable, "gang_create: no backend for ",
       device_name(device), " buffers is available in this process",
       candidates.empty()
           ? str_cat(" (none is built in, and no module in ",
                     places(), " serves them",
                     module.empty() ? "" : str_cat("; the ", module,
                                                   " backend is the module libgang-",
                                                   module, ".so"),
                     ")")
           : reasons);
}

// Several hosts, and several ranks on some of them.
bool spans_shared_hosts(const std::vector<int>& host_of) {
  const size_t hosts = std::set<int>(host_of.begin(), host_of.end()).size();
  return hosts > 1 && hosts < host_of.size();
}

BackendInfo choose(const std::string& name, DeviceType device,
                   const std::vector<int>& host_of, bool compose) {
  const bool one_host =
      !host_of.empty() && std::all_of(host_of.begin(), host_of.end(),
                                      [&](int h) { return h == host_of.front(); });
  BackendInfo wide = select(name, device, one_host);
  const bool automatic = name.empty() || name == "auto";
  if (one_host || !automatic || !compose || !spans_shared_hosts(host_of)) return wide;
  Composer composer;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    composer = r.composer;
  }
  if (!composer) return wide;
  // Several ranks on some hosts: a one-host backend within each, the wide
  // one between them.
  BackendInfo local = select(name, device, true);
  return local.one_host_only ? composer(local, wide) : wide;
}

void register_source(BackendSource source) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.sources.push_back(std::move(source));
}

void register_composer(Composer composer) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.composer = std::move(composer);
}

}  // namespace gang::core
