// The one table of backends. Built-in backends register themselves with a
// static BackendRegistrar; the core looks them up by name and never names one.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"

namespace gang::core {

void register_backend(const std::string& name, BackendFactory factory);

// The factory registered under name, or null.
BackendFactory find_backend(const std::string& name);

std::vector<std::string> backend_names();

struct BackendRegistrar {
  BackendRegistrar(const char* name, BackendFactory factory) {
    register_backend(name, factory);
  }
};

}  // namespace gang::core
