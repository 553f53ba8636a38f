// The TCP store server: one thread serves every connection through epoll,
// so thousands of ranks cost descriptors, not threads, and a pass of the
// thread costs what is ready, not how many are connected.
//
// It defends itself (ServerOptions, from the GANG_STORE_* variables): it
// listens only on the host it is given; with a token, a connection must
// authenticate before anything else, and without one, a connection from a
// process of another user of this machine is refused (AllowedUsers);
// connections not yet authenticated have a small quota and a short
// deadline of their own, apart from the limit on authenticated ones;
// keys, values, requests, the bytes held in all and the number of
// connections are bounded; a request's bytes are buffered as they arrive,
// never as announced; idle connections, requests that stall half-way and
// connections that never authenticate are closed. Whatever a connection
// does, only that connection is closed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "store/store_options.h"

namespace gang::store {

// What the server's constructor throws when another socket already listens
// on its port (EADDRINUSE), so a caller that may share the port with a
// launcher's server can tell "taken" from other failures. A kSystem error.
class PortInUse : public Error {
 public:
  using Error::Error;
};

// What a server has served, refused or closed, counted from its start.
struct ServerStats {
  uint64_t requests = 0;          // requests carried out (AUTH included)
  uint64_t accepted = 0;          // connections accepted
  uint64_t over_connections = 0;  // turned away: GANG_STORE_MAX_CONNECTIONS
  uint64_t over_pending = 0;      // pushed out, still unauthenticated, by
                                  // GANG_STORE_MAX_PENDING_CONNECTIONS
  uint64_t denied = 0;            // no token, or a wrong one
  uint64_t other_users = 0;       // a process of another user (no token)
  uint64_t refused = 0;           // a request over a limit
  uint64_t malformed = 0;         // not the protocol
  uint64_t timed_out = 0;         // idle, stalled, never authenticated
};

class TcpStoreServer {
 public:
  // Listens on host at port (0: a free one) and starts serving. host is an
  // address or a name: every address it resolves to is bound; "0.0.0.0",
  // "::" and "*" bind every interface (IPv6 and IPv4 where the machine has
  // IPv6). Throws kSystem when the port cannot be bound: PortInUse when
  // another socket listens on it, plain Error otherwise (no permission, an
  // address of another machine, ...); kInvalidArgument for a bad port.
  // Without a token, a server other machines can reach warns through
  // options.log as it starts.
  TcpStoreServer(const std::string& host, int port, ServerOptions options);
  // Stops the thread and closes every connection; parked clients see the
  // connection close.
  ~TcpStoreServer();

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }
  // The addresses listened on, numeric ("127.0.0.1", "::1"; "::" or
  // "0.0.0.0" for every interface).
  const std::vector<std::string>& addresses() const { return addresses_; }
  // An address a client on this machine reaches the server at: loopback
  // for a server on every interface, else the first address bound.
  std::string local_address() const;
  // Whether every address bound is a loopback one (so other machines
  // cannot reach the server).
  bool loopback_only() const;

  ServerStats stats() const;

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  int port_ = 0;
  std::vector<std::string> addresses_;
  std::thread thread_;
};

}  // namespace gang::store
