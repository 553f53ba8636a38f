// A client of PyTorch's TCPStore (torch.distributed.TCPStore), the store
// torchrun's agent serves on MASTER_ADDR:MASTER_PORT. Under torchrun that
// port is taken, so gang rendezvouses through the agent's store instead of
// serving its own ("torch://host:port").
//
// The wire protocol is the one PyTorch 1.x up to 2.1 speaks (Debian 12 ships
// 1.13). A request is a query-type byte followed by its arguments; integers
// are in the host's byte order, which is little-endian on every platform
// PyTorch supports, and gang writes them little-endian explicitly. A string
// is a u64 length and its bytes.
//
//   type  query        arguments                   reply
//      0  SET          key, value                  (none)
//      2  GET          key                         value (u64 length, bytes)
//      3  ADD          key, i64 delta              i64 sum
//      4  CHECK        u64 n, n keys               u8: 0 all exist, 1 not
//      5  WAIT         u64 n, n keys               u8 0 once all exist
//      8  DELETE_KEY   key                         i64 number deleted
//
// The server closes a connection on anything it does not expect (an unknown
// type byte, GET of a missing key, ADD on a value that is not an integer),
// so GET is always preceded by WAIT on the same connection, and a closed
// connection is reported as a store error. There is no handshake in these
// versions: opening the store sends a CHECK and requires a one-byte 0 or 1
// back, which a gang store server, Redis or an HTTP server never sends.
//
// Every key K is stored as "/gang/K": PyTorch's own clients add "/" in front
// of their keys, so gang's keys sit in a namespace of their own beside
// torch.distributed's, and a PyTorch program sees them as "gang/K".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/socket_io.h"
#include "store/store.h"

namespace gang::store {

class TorchStore : public Store {
 public:
  // Connects, retrying until the timeout since the agent may start later,
  // and checks that a TCPStore answers; throws kStore naming the url when
  // none does.
  TorchStore(std::string host, int port, Millis timeout);

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  using Store::wait;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  void remove(const std::string& key) override;
  // Whether key exists now, without waiting for it.
  bool check(const std::string& key);

  std::string host() const override { return host_; }
  int port() const override { return port_; }

  static constexpr const char* kKeyPrefix = "/gang/";

 private:
  class Exchange;
  std::string url() const;

  std::string host_;
  int port_;
  net::ConnectionPool pool_;
};

}  // namespace gang::store
