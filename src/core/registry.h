// The one table of backends. Built-in backends register themselves with a
// static BackendRegistrar; modules (gang_backend.h) are found by the plugin
// loader and take the same path. The registry owns selection: "auto" is the
// available backend of highest priority for the device, so the core never
// names a backend.
#pragma once

#include <functional>
#include <memory>
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

// The backend for a gang: `name` ("" or "auto": the best available for
// `device`). Built-in backends first, then modules from GANG_PLUGIN_PATH
// and <libdir>/gang/. Throws kInvalidArgument for a name nothing answers
// to, kUnavailable for a module that failed to load, a backend whose probe
// failed, a device nothing serves. `one_host`: every rank of the gang runs
// on this host.
BackendInfo select_backend(const std::string& name, DeviceType device,
                           bool one_host);

// The names registered so far, for messages.
std::vector<std::string> backend_names();

struct BackendRegistrar {
  explicit BackendRegistrar(BackendInfo info) {
    register_backend(std::move(info));
  }
};

}  // namespace gang::core
