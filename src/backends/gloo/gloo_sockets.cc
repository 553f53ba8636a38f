#include "backends/gloo/gloo_sockets.h"

#include <dirent.h>
#include <gloo/transport/tcp/address.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

namespace gang::backends::gloo_impl {

namespace {

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

// Calls f(fd, inode) for every socket descriptor of this process.
void for_each_socket(const std::function<void(int, ino_t)>& f) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), closedir);
  if (!dir) return;
  const int own = dirfd(dir.get());
  while (const dirent* e = readdir(dir.get())) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode)) {
      f(static_cast<int>(fd), st.st_ino);
    }
  }
}

}  // namespace

std::vector<ino_t> socket_inodes() {
  std::vector<ino_t> out;
  for_each_socket([&](int, ino_t ino) { out.push_back(ino); });
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<ino_t> context_sockets(::gloo::Context& ctx,
                                   const std::vector<ino_t>& before) {
  std::vector<sockaddr_storage> pairs;
  for (int r = 0; r < ctx.size; ++r) {
    if (r == ctx.rank || !ctx.getPair(r)) continue;
    const auto* addr = dynamic_cast<const ::gloo::transport::tcp::Address*>(
        &ctx.getPair(r)->address());
    if (addr) pairs.push_back(addr->getSockaddr());
  }
  std::vector<ino_t> out;
  for_each_socket([&](int fd, ino_t ino) {
    if (std::binary_search(before.begin(), before.end(), ino)) return;
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return;
    for (const auto& p : pairs) {
      if (same_endpoint(local, p)) {
        out.push_back(ino);
        return;
      }
    }
  });
  std::sort(out.begin(), out.end());
  return out;
}

void shutdown_sockets(const std::vector<ino_t>& inodes) {
  for_each_socket([&](int fd, ino_t ino) {
    if (std::binary_search(inodes.begin(), inodes.end(), ino)) {
      ::shutdown(fd, SHUT_RDWR);
    }
  });
}

}  // namespace gang::backends::gloo_impl
