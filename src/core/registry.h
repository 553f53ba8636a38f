// The one table of backends. Built-in backends register themselves with a
// static BackendRegistrar; the module host (src/plugin/) registers itself
// as a BackendSource, so modules (gang_backend.h) take the same path and
// the core never names where they come from. The registry owns selection: "auto" is the
// available backend of highest priority for the device, so the core never
// names a backend.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.h"

namespace gang::core {

using BackendFactory =
    std::function<std::unique_ptr<Backend>(const BackendConfig&)>;

struct BackendInfo {
  std::string name;
  // Device types it serves.
  std::vector<DeviceType> devices;
  // "auto" picks the available backend of highest priority; a negative
  // priority is never picked by "auto", only by name.
  int priority = 0;
  // Serves only gangs whose ranks all run on one host (shared memory):
  // "auto" considers it only for those.
  bool one_host_only = false;
  // "" when the backend can be used in this process, else why not (a
  // library or a device is missing). Called at most once per selection.
  std::function<std::string()> probe;
  BackendFactory create;
  // False for a backend that stands in for every rank in one process (the
  // fake gang): its gangs need no store and no creation barrier.
  bool needs_rendezvous = true;
  // "built in", or the module's path.
  std::string origin = "built in";
};

void register_backend(BackendInfo info);

// Backends that are not built in: asked for a name no built-in backend
// answers to, and for all it has when "auto" chooses.
struct BackendSource {
  // The backend called `name`, nullopt if there is none; throws
  // kUnavailable for one that exists but cannot be used.
  std::function<std::optional<BackendInfo>(const std::string& name)> find;
  // Every backend it has that can be used.
  std::function<std::vector<BackendInfo>()> all;
  // Where it looked, for messages.
  std::function<std::vector<std::string>()> places;
  // The backend this build ships in it that is called `name`, or serves
  // `device` when `name` is "": its name, "" if none (a missing one is
  // then "not installed", not "unknown").
  std::function<std::string(const std::string& name, DeviceType device)> shipped;
};
void register_source(BackendSource source);

// The one place that decides a gang's backend, from facts every rank
// shares: the name asked for ("" or "auto": the best available for
// `device`) and the host of each rank (`host_of`, empty while not known,
// i.e. before the rendezvous of a gang of more than one). Built-in
// backends first, then the sources'. On one host, backends that serve only
// one host are eligible; across hosts with several ranks on some, "auto"
// composes the best one-host backend with the wide one in two levels, when
// a composer is registered and `compose` allows it. Throws
// kInvalidArgument for a name nothing answers to, kUnavailable for a
// module that failed to load, a backend whose probe failed, a device
// nothing serves.
BackendInfo choose(const std::string& name, DeviceType device,
                   const std::vector<int>& host_of, bool compose = true);

// Composes a backend that serves one host (`local`) with one that spans
// hosts (`wide`) in two levels; the two-level backend registers it.
using Composer = std::function<BackendInfo(const BackendInfo& local, const BackendInfo& wide)>;
void register_composer(Composer composer);

// The names registered so far, for messages.
std::vector<std::string> backend_names();

struct BackendRegistrar {
  explicit BackendRegistrar(BackendInfo info) {
    register_backend(std::move(info));
  }
};

}  // namespace gang::core
