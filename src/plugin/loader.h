// Finds backend modules (gang/gang_backend.h) on disk and turns them into
// registry entries. A module for backend <name> is the file
// libgang-<name>.so in the first search directory that has it. The loader
// registers itself with the registry as a source (core::BackendSource):
// asked for names no built-in backend answers to, and for every module
// when "auto" chooses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/registry.h"

namespace gang::plugin {

using core::BackendInfo;
using core::DeviceType;

// Where modules are looked for, in order: the entries of GANG_PLUGIN_PATH,
// then <libdir>/gang, where <libdir> holds the loaded libgang.so.
std::vector<std::string> search_dirs();

// The module for backend `name`: the first <dir>/libgang-<name>.so of
// search_dirs(), loaded once per process (later calls reuse it). nullopt
// when no directory has the file, or `name` is not [a-z0-9_]+ (it then
// cannot name a module). Throws gang::Error(kUnavailable, "<file>: <why>")
// when the file exists but cannot be used: dlopen fails, it has no symbol
// gang_backend_plugin, its table is of another ABI version or incomplete,
// or it names another backend.
std::optional<BackendInfo> find_module(const std::string& name);

// Every module that loads: each libgang-<name>.so of every search
// directory, the first directory deciding for a name, in name order. A
// module that cannot be used is left out, with an info-level log line
// naming the file and the reason.
std::vector<BackendInfo> all_modules();

// The module this build ships that is called `name`, or serves `device`
// when `name` is "": its name, "" if none.
std::string shipped_module(const std::string& name, DeviceType device);

}  // namespace gang::plugin
