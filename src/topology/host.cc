#include "topology/host.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "base/env.h"

namespace gang::topology {

namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string link_target(const char* path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string compute() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0) name[0] = '\0';
  return std::string(name) + "/" +
         first_line("/proc/sys/kernel/random/boot_id") + "/" +
         link_target("/proc/self/ns/net") + "/" +
         link_target("/proc/self/ns/ipc");
}

}  // namespace

const std::string& host_id() {
  static const std::string id = [] {
    const char* given = base::env("GANG_HOST_ID");
    return given != nullptr ? std::string(given) : compute();
  }();
  return id;
}

}  // namespace gang::topology
