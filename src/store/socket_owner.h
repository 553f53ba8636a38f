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

#include <sys/socket.h>
#include <sys/types.h>

#include <string>

namespace gang::store {

struct SocketOwner {
  enum Kind {
    kFound,     // uid is the owner of the peer's socket, a socket a process
                // holds, whatever its TCP state (a peer that shut its side
                // down still holds it)
    kNotLocal,  // no socket of this host is the peer: another machine (or
                // another network namespace)
    kUnowned,   // the peer's socket is held by no process (closed and
                // lingering, or not yet accepted), so the kernel's owner for
                // it (root) proves nothing; `why`
    kUnknown,   // the kernel could not be asked; `why` says what failed
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

// Whether `peer` (an accepted connection's remote address) is an address
// of this host: a loopback address, or one of this network namespace's
// interfaces. A peer of this host is asked for its user, and refused when
// it cannot be told (fail closed); only another machine goes by the token.
bool is_this_host(const sockaddr_storage& peer);

// A user's name for messages: "root (uid 0)", or "uid 1234" when it has
// none.
std::string user_name(uid_t uid);

}  // namespace gang::store
