// The TCP store server: one thread serves every connection with poll(), so
// thousands of ranks cost descriptors, not threads.
#pragma once

#include <memory>
#include <thread>

#include "base/error.h"

namespace gang::store {

// What the server's constructor throws when another socket already listens
// on its port (EADDRINUSE), so a caller that may share the port with a
// launcher's server can tell "taken" from other failures. A kSystem error.
class PortInUse : public Error {
 public:
  using Error::Error;
};

class TcpStoreServer {
 public:
  // Listens on every interface at port (0: a free one) and starts serving.
  // Throws kSystem when the port cannot be bound: PortInUse when another
  // socket listens on it, plain Error otherwise (no permission, ...).
  explicit TcpStoreServer(int port);
  // Stops the thread and closes every connection; parked clients see the
  // connection close.
  ~TcpStoreServer();

  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port actually bound.
  int port() const { return port_; }

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gang::store
