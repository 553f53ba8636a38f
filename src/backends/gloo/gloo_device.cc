#include "backends/gloo/gloo_device.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/transport/tcp/device.h>
#include <csignal>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/gloo/gloo_loop_turns.h"
#include "core/env.h"
#include "base/error.h"
#include "core/log.h"

namespace gang::backends::gloo_impl {

namespace {

constexpr const char* kLoopback = "127.0.0.1";

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string numeric(const sockaddr* sa, socklen_t len) {
  char buf[NI_MAXHOST];
  if (getnameinfo(sa, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) {
    return "";
  }
  return buf;
}

// The first IPv4 address of an interface that is up and not loopback.
std::string first_external_address() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* ifa = list; ifa && found.empty(); ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_LOOPBACK)) {
      continue;
    }
    found = numeric(ifa->ifa_addr, sizeof(sockaddr_in));
  }
  freeifaddrs(list);
  return found;
}

// Gloo writes with writev(), which raises SIGPIPE when a peer has gone away.
// A process that keeps SIGPIPE's default action would die there instead of
// seeing GANG_ERR_PEER_LOST, so the default becomes "ignore"; a handler or
// disposition the program chose itself is left alone.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 &&
      current.sa_handler == SIG_DFL && !(current.sa_flags & SA_SIGINFO)) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

// The devices this process has open, by where they listen: a gang that
// needs one on the same interface or address shares it, and with it one
// event-loop thread (Gloo's loop wakes every 10 ms even when idle, so a
// process with many gangs would otherwise keep a thread ticking for each).
// Held weakly: a device closes with its last gang. A forked child inherits
// the map but not the loop threads, so entries of another process are
// never handed out.
struct OpenDevices {
  std::mutex mu;
  pid_t pid = 0;
  std::map<std::string, std::weak_ptr<::gloo::transport::Device>> by_place;
};

OpenDevices& open_devices() {
  static auto* d = new OpenDevices();  // never destroyed: gangs may outlive statics
  return *d;
}

}  // namespace

std::string local_address_toward(const std::string& host) {
  if (host.empty()) {
    const std::string ext = first_external_address();
    return ext.empty() ? kLoopback : ext;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) {
    fail(Status::kSystem, "gang_create: cannot resolve the store host \"", host,
         "\" to choose a network interface");
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);
  const auto* target = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
  // A loopback store: listen on its very address (127.0.0.1, or any of
  // 127/8, which reach each other), so that processes reaching the store at
  // different loopback addresses have port spaces of their own.
  if ((ntohl(target->sin_addr.s_addr) >> 24) == 127) {
    return numeric(res->ai_addr, static_cast<socklen_t>(res->ai_addrlen));
  }
  // A connected UDP socket sends nothing, but makes the kernel pick the
  // route, and so the source address, it would use for that host.
  Fd fd(::socket(AF_INET, SOCK_DGRAM, 0));
  if (fd.get() < 0 || ::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    fail(Status::kSystem, "gang_create: no route to the store host \"", host,
         "\": ", std::strerror(errno));
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    fail(Status::kSystem, "gang_create: getsockname: ", std::strerror(errno));
  }
  return numeric(reinterpret_cast<sockaddr*>(&local), len);
}

std::shared_ptr<::gloo::transport::Device> make_device(
    const std::string& store_host) {
  ignore_default_sigpipe();
  ::gloo::transport::tcp::attr attr;
  const std::string ifname = core::env::socket_ifname();
  if (!ifname.empty()) {
    attr.iface = ifname;
  } else {
    attr.hostname = local_address_toward(store_host);
  }
  const std::string place = ifname.empty() ? "address " + attr.hostname : "interface " + ifname;
  OpenDevices& open = open_devices();
  std::lock_guard<std::mutex> lock(open.mu);
  if (open.pid != ::getpid()) {
    open.by_place.clear();
    open.pid = ::getpid();
  }
  if (auto shared = open.by_place[place].lock()) return shared;
  try {
    std::shared_ptr<::gloo::transport::Device> dev =
        with_prompt_turns(std::dynamic_pointer_cast<::gloo::transport::tcp::Device>(
            ::gloo::transport::tcp::CreateDevice(attr)));
    GANG_LOG(kInfo, "gloo device: ", dev->str());
    open.by_place[place] = dev;
    return dev;
  } catch (const std::exception& e) {
    fail(Status::kSystem, "gang_create: cannot open a TCP device on ", place, ": ", e.what());
  }
}

}  // namespace gang::backends::gloo_impl
