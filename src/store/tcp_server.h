// The TCP store server: one thread serves every connection with poll(), so
// thousands of ranks cost descriptors, not threads.
#pragma once

#include <memory>
#include <thread>

namespace gang::store {

class TcpStoreServer {
 public:
  // Listens on every interface at port (0: a free one) and starts serving.
  // Throws kSystem when the port cannot be bound (in use, no permission).
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
