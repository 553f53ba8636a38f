#include "plugin/loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "base/error.h"
#include "core/env.h"
#include "core/log.h"
#include "plugin/plugin_backend.h"
#include "gang/gang_backend.h"

namespace gang::plugin {

using core::BackendInfo;
using core::DeviceType;

namespace {

constexpr char kPrefix[] = "libgang-";
constexpr char kSuffix[] = ".so";

// [a-z0-9_]+: a name that can only ever mean one file, so a backend name
// taken from options can never walk out of the search directories.
bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string join(const std::string& dir, const std::string& file) {
  if (dir.empty() || dir.back() == '/') return dir + file;
  return dir + "/" + file;
}

std::string module_file(const std::string& dir, const std::string& name) {
  return join(dir, kPrefix + name + kSuffix);
}

// Present and not a directory: anything else (a file we may not read, a
// symlink to garbage) is the user's module, and dlopen says what is wrong.
bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// The directory of the object this code was linked into (libgang.so), or ""
// if the loader cannot tell.
std::string library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&search_dirs), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  const std::string file = info.dli_fname;
  const size_t slash = file.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : file.substr(0, slash);
}

// Modules that loaded, by path. Never destroyed, so never unloaded: a
// module's threads, atexit handlers and objects still alive at exit (a gang
// the program did not destroy) may run its code until the very end.
struct Cache {
  struct Loaded {
    const gang_backend_t* table;
    std::shared_ptr<void> module;
  };
  std::mutex mu;
  std::map<std::string, Loaded> modules;
};

Cache& cache() {
  static Cache* const c = new Cache;
  return *c;
}

// Loads the module at path (once) and checks its table; throws
// kUnavailable naming the file. A module that fails is unloaded again, so a
// fixed file is picked up by the next attempt.
BackendInfo load(const std::string& path) {
  Cache& c = cache();
  // Held across dlopen so that two threads asking for one module load it
  // once; a module's entry point does no more than return its table.
  std::lock_guard<std::mutex> lock(c.mu);
  const auto it = c.modules.find(path);
  if (it != c.modules.end()) {
    return make_plugin_info(it->second.table, it->second.module, path);
  }

  ::dlerror();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    std::string why = e != nullptr ? e : "dlopen failed";
    // glibc starts with the path, which the message names already.
    if (why.compare(0, path.size() + 2, path + ": ") == 0) {
      why.erase(0, path.size() + 2);
    }
    fail(Status::kUnavailable, path, ": cannot load it: ", why);
  }
  std::shared_ptr<void> module(handle, [](void* h) { ::dlclose(h); });

  ::dlerror();
  void* symbol = ::dlsym(handle, GANG_BACKEND_ENTRY);
  if (symbol == nullptr) {
    fail(Status::kUnavailable, path, ": has no symbol ", GANG_BACKEND_ENTRY,
         " (is it a gang backend module?)");
  }
  // POSIX guarantees that a dlsym result converts to a function pointer.
  const auto entry = reinterpret_cast<gang_backend_plugin_fn>(symbol);
  const gang_backend_t* table = entry();
  BackendInfo info = make_plugin_info(table, module, path);
  c.modules.emplace(path, Cache::Loaded{table, std::move(module)});
  return info;
}

// The module for `name` at path, whose file name promises that backend.
BackendInfo load_named(const std::string& path, const std::string& name) {
  BackendInfo info = load(path);
  if (info.name != name) {
    fail(Status::kUnavailable, path, ": its backend is named \"", info.name,
         "\", not \"", name, "\" as the file name says");
  }
  return info;
}

// The backend names of the module files in dir, sorted; none if dir cannot
// be read (a search directory need not exist).
std::vector<std::string> module_names(const std::string& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return names;
  const std::string prefix = kPrefix;
  const std::string suffix = kSuffix;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string file = e->d_name;
    if (file.size() <= prefix.size() + suffix.size() ||
        file.compare(0, prefix.size(), prefix) != 0 ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    std::string name =
        file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
    if (!valid_name(name)) {
      GANG_LOG(kDebug, "backend module ", join(dir, file),
               " skipped: its name is not [a-z0-9_]+");
      continue;
    }
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs = core::env::plugin_path();
  // The library does not move while it is loaded.
  static const std::string libdir = library_dir();
  if (!libdir.empty()) dirs.push_back(join(libdir, "gang"));
  return dirs;
}

std::optional<BackendInfo> find_module(const std::string& name) {
  if (!valid_name(name)) return std::nullopt;
  for (const std::string& dir : search_dirs()) {
    const std::string path = module_file(dir, name);
    if (exists(path)) return load_named(path, name);
  }
  return std::nullopt;
}

std::vector<BackendInfo> all_modules() {
  std::vector<BackendInfo> modules;
  std::set<std::string> seen;
  for (const std::string& dir : search_dirs()) {
    for (const std::string& name : module_names(dir)) {
      // The first directory decides, as for find_module: a broken module
      // is not replaced by a later one of the same name.
      if (!seen.insert(name).second) continue;
      const std::string path = module_file(dir, name);
      if (!exists(path)) continue;
      try {
        modules.push_back(load_named(path, name));
      } catch (const Error& e) {
        GANG_LOG(kInfo, "backend module skipped: ", e.what());
      }
    }
  }
  std::sort(modules.begin(), modules.end(),
            [](const BackendInfo& a, const BackendInfo& b) {
              return a.name < b.name;
            });
  return modules;
}

// Modules this build of gang ships, as "name:device,name:device" (set by
// CMake, e.g. "nccl:cuda").
#ifndef GANG_SHIPPED_MODULES
#define GANG_SHIPPED_MODULES ""
#endif

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

namespace {

// The module host joins the registry as a source, as built-in backends
// join it with their registrars.
const bool registered = [] {
  core::BackendSource source;
  source.find = find_module;
  source.all = all_modules;
  source.places = search_dirs;
  source.shipped = shipped_module;
  core::register_source(std::move(source));
  return true;
}();

}  // namespace

}  // namespace gang::plugin
