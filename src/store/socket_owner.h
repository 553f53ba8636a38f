// Which user owns the other end of an accepted TCP connection, when that end
// is a socket of this machine. A store server without a token asks this of
// every connection, so that another user's process on the same host cannot
// join a job (TCP carries no credentials: SO_PEERCRED works on Unix sockets
// only).
//
// The kernel is asked for the one socket whose local address is the peer's
// and whose remote address is ours: through NETLINK_SOCK_DIAG (an exact
// lookup, what `ss` uses), else by reading /proc/net/tcp and tcp6, whose
// uid column says the same. Both see the sockets of this network namespace
// only, which is where every local peer of a loopback address lives.
#pragma once

#include <sys/types.h>

#include <string>

namespace gang::store {

struct SocketOwner {
  enum Kind {
    kFound,           // uid is the owner of the peer's socket
    kNotLocal,        // no socket of this host is the peer: another machine (or
                      // another network namespace)
    kNotEstablished,  // the peer's socket is not (yet, or any more)
                      // connected, so its owner proves nothing; `why`
    kUnknown,         // the kernel could not be asked; `why` says what failed
  } kind = kUnknown;
  uid_t uid = 0;
  std::string why;
};

// The owner of the socket at the other end of fd, a connected TCP socket.
SocketOwner peer_owner(int fd);

// The same, asking one mechanism only; for tests. A mechanism that is
// unavailable answers kUnknown.
SocketOwner peer_owner_by_netlink(int fd);
SocketOwner peer_owner_by_proc(int fd);

// A user's name for messages: "root (uid 0)", or "uid 1234" when it has
// none.
std::string user_name(uid_t uid);

}  // namespace gang::store
