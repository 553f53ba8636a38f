#include "store/socket_owner.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "base/text.h"

namespace gang::store {

namespace {

using base::UniqueFd;
using base::errno_text;

// One end of a connection: an IPv4 address (4 bytes, an IPv4-mapped IPv6
// address folded back to its IPv4 form) or an IPv6 one (16).
struct Endpoint {
  int family = AF_UNSPEC;
  uint8_t addr[16] = {};
  uint16_t port = 0;   // host order
  uint32_t scope = 0;  // IPv6 link-local interface
};

bool endpoint(const sockaddr_storage& ss, Endpoint* e) {
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    e->family = AF_INET;
    std::memcpy(e->addr, &a->sin_addr, 4);
    e->port = ntohs(a->sin_port);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    e->port = ntohs(a->sin6_port);
    e->scope = a->sin6_scope_id;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      // A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d; the
      // client's own socket is an IPv4 one.
      e->family = AF_INET;
      std::memcpy(e->addr, a->sin6_addr.s6_addr + 12, 4);
    } else {
      e->family = AF_INET6;
      std::memcpy(e->addr, &a->sin6_addr, 16);
    }
    return true;
  }
  return false;
}

// Our end and the peer's end of fd; false with *why set when fd has none.
bool ends(int fd, Endpoint* ours, Endpoint* peer, std::string* why) {
  sockaddr_storage a{};
  sockaddr_storage b{};
  socklen_t la = sizeof a;
  socklen_t lb = sizeof b;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0) {
    *why = errno_text(errno);
    return false;
  }
  if (!endpoint(a, ours) || !endpoint(b, peer) ||
      ours->family != peer->family) {
    *why = "not a TCP/IP connection";
    return false;
  }
  return true;
}

SocketOwner unknown(std::string why) {
  SocketOwner o;
  o.kind = SocketOwner::kUnknown;
  o.why = std::move(why);
  return o;
}

SocketOwner not_local() {
  SocketOwner o;
  o.kind = SocketOwner::kNotLocal;
  return o;
}

// The kernel reports the owner of a socket a process holds (one with an
// inode), in whatever TCP state: a peer that shut its side down (FIN_WAIT)
// still holds its socket. One held by no process (inode 0: closed and
// lingering, or not yet accepted) is reported as root's, which proves
// nothing.
SocketOwner found(int state, uid_t uid, unsigned long inode) {
  SocketOwner o;
  if (inode == 0) {
    o.kind = SocketOwner::kUnowned;
    o.why = str_cat("the peer's socket (TCP state ", state, ") is held by no process");
    return o;
  }
  o.kind = SocketOwner::kFound;
  o.uid = uid;
  return o;
}

// The address as /proc/net/tcp prints it: each 32-bit word as the machine
// holds it, in hex; then the port.
std::string proc_address(const uint8_t* addr, size_t n, uint16_t port) {
  std::string out;
  char word[16];
  for (size_t i = 0; i < n; i += 4) {
    uint32_t w = 0;
    std::memcpy(&w, addr + i, 4);
    std::snprintf(word, sizeof word, "%08X", w);
    out += word;
  }
  std::snprintf(word, sizeof word, ":%04X", port);
  return out + word;
}

// The IPv6 form of an IPv4 address, as a v6 socket connected to it holds it.
void mapped(const uint8_t v4[4], uint8_t out[16]) {
  std::memset(out, 0, 16);
  out[10] = 0xff;
  out[11] = 0xff;
  std::memcpy(out + 12, v4, 4);
}

// Looks for the line of `file` whose local address is `local` and remote
// address `remote`: 1 found (*state, *uid, *inode set), 0 not there, -1
// unreadable.
int scan_proc(const char* file, const std::string& local,
              const std::string& remote, int* state, uid_t* uid, unsigned long* inode) {
  std::ifstream in(file);
  if (!in) return -1;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, loc, rem, st, queues, timer, retransmits, timeout;
    unsigned long owner = 0;
    unsigned long ino = 0;
    if (!(fields >> sl >> loc >> rem >> st >> queues >> timer >> retransmits >>
          owner >> timeout >> ino)) {
      continue;
    }
    if (loc != local || rem != remote) continue;
    *state = static_cast<int>(std::strtol(st.c_str(), nullptr, 16));
    *uid = static_cast<uid_t>(owner);
    *inode = ino;
    return 1;
  }
  return 0;
}

}  // namespace

SocketOwner peer_owner_by_netlink(int fd) {
  Endpoint ours;
  Endpoint peer;
  std::string why;
  if (!ends(fd, &ours, &peer, &why)) return unknown(why);
  UniqueFd nl(
      ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl.valid()) {
    return unknown(str_cat("no sock_diag netlink socket: ", errno_text(errno)));
  }
  // The kernel answers at once; the timeout only keeps a server's thread
  // from hanging on a kernel that does not.
  timeval tv{1, 0};
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  struct {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } req{};
  req.header.nlmsg_len = sizeof req;
  req.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.header.nlmsg_flags = NLM_F_REQUEST;  // one socket, not a dump
  req.header.nlmsg_seq = 1;
  req.body.sdiag_family = static_cast<uint8_t>(peer.family);
  req.body.sdiag_protocol = IPPROTO_TCP;
  req.body.idiag_states = ~0U;
  // The socket whose own end is the peer's address and whose other end is
  // ours: the client's socket, not the one we accepted.
  inet_diag_sockid& id = req.body.id;
  id.idiag_sport = htons(peer.port);
  id.idiag_dport = htons(ours.port);
  const size_t n = peer.family == AF_INET ? 4 : 16;
  std::memcpy(id.idiag_src, peer.addr, n);
  std::memcpy(id.idiag_dst, ours.addr, n);
  id.idiag_if = peer.scope;
  id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = ::sendto(nl.get(), &req, sizeof req, 0,
                    reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof req)) {
    return unknown(str_cat("sock_diag request: ", errno_text(errno)));
  }
  alignas(nlmsghdr) char buf[8192];
  ssize_t got;
  do {
    got = ::recv(nl.get(), buf, sizeof buf, 0);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return unknown(str_cat("sock_diag reply: ", errno_text(errno)));
  auto len = static_cast<unsigned int>(got);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len);
       h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (e->error == -ENOENT) return not_local();
      return unknown(str_cat("sock_diag: ", errno_text(-e->error)));
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
    const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    // An exact lookup may fall back to a listener on the peer's port; only
    // the connected socket itself counts.
    if (m->id.idiag_dport != htons(ours.port)) return not_local();
    return found(m->idiag_state, static_cast<uid_t>(m->idiag_uid), m->idiag_inode);
  }
  return unknown("sock_diag: an empty reply");
}

SocketOwner peer_owner_by_proc(int fd) {
  Endpoint ours;
  Endpoint peer;
  std::string why;
  if (!ends(fd, &ours, &peer, &why)) return unknown(why);
  int state = 0;
  uid_t uid = 0;
  unsigned long inode = 0;
  int readable = 0;
  int rc = -1;
  if (peer.family == AF_INET) {
    rc = scan_proc("/proc/net/tcp", proc_address(peer.addr, 4, peer.port),
                   proc_address(ours.addr, 4, ours.port), &state, &uid, &inode);
    readable += rc >= 0;
    if (rc == 1) return found(state, uid, inode);
    // An IPv6 socket of the client's may hold the connection in mapped form.
    uint8_t p6[16];
    uint8_t o6[16];
    mapped(peer.addr, p6);
    mapped(ours.addr, o6);
    rc = scan_proc("/proc/net/tcp6", proc_address(p6, 16, peer.port),
                   proc_address(o6, 16, ours.port), &state, &uid, &inode);
  } else {
    rc = scan_proc("/proc/net/tcp6", proc_address(peer.addr, 16, peer.port),
                   proc_address(ours.addr, 16, ours.port), &state, &uid, &inode);
  }
  readable += rc >= 0;
  if (rc == 1) return found(state, uid, inode);
  if (readable == 0) return unknown("cannot read /proc/net/tcp");
  return not_local();
}

SocketOwner peer_owner(int fd) {
  SocketOwner o = peer_owner_by_netlink(fd);
  if (o.kind != SocketOwner::kUnknown) return o;
  // Netlink may be missing (a kernel without sock_diag) or filtered (a
  // sandbox); /proc says the same, more slowly.
  SocketOwner p = peer_owner_by_proc(fd);
  if (p.kind == SocketOwner::kUnknown) p.why = o.why + "; " + p.why;
  return p;
}

bool is_this_host(const sockaddr_storage& peer) {
  Endpoint p;
  if (!endpoint(peer, &p)) return false;
  if (p.family == AF_INET && p.addr[0] == 127) return true;
  if (p.family == AF_INET6) {
    in6_addr a;
    std::memcpy(&a, p.addr, 16);
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
  }
  ifaddrs* all = nullptr;
  // Without the list, a peer counts as this host's: asked, and refused
  // when it cannot be told.
  if (::getifaddrs(&all) != 0) return true;
  bool mine = false;
  for (const ifaddrs* i = all; i != nullptr && !mine; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    sockaddr_storage ss{};
    const size_t n = i->ifa_addr->sa_family == AF_INET    ? sizeof(sockaddr_in)
                     : i->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                          : 0;
    if (n == 0) continue;
    std::memcpy(&ss, i->ifa_addr, n);
    Endpoint e;
    mine = endpoint(ss, &e) && e.family == p.family &&
           std::memcmp(e.addr, p.addr, p.family == AF_INET ? 4 : 16) == 0;
  }
  ::freeifaddrs(all);
  return mine;
}

std::string user_name(uid_t uid) { return base::user_name(uid); }

}  // namespace gang::store
