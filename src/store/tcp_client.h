// The TCP store client, and the store a server's own process uses.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/socket_io.h"
#include "store/store.h"
#include "store/tcp_protocol.h"
#include "store/tcp_server.h"
#include "base/unique_fd.h"

namespace gang::store {

using base::UniqueFd;

namespace detail {
class Deadline;
}

class TcpStore : public Store {
 public:
  // Connects to host:port, retrying until the timeout since the server may
  // start later or turn it away while busy; throws kStore when it cannot,
  // or when the server refuses `token` ("": none; sent as AUTH first on
  // every connection) or this process's user (Denied). With a
  // server, that server is owned and stopped last, and the connections go
  // to its local_address() while host() still reports `host`.
  TcpStore(std::string host, int port, Millis timeout, std::string token,
           std::unique_ptr<TcpStoreServer> server = nullptr);
  ~TcpStore() override;

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  using Store::wait;
  Bytes get(const std::string& key, Millis timeout) override;
  // Windows of gets in one write each, their replies read in order.
  std::vector<Bytes> get_many(const std::vector<std::string>& keys, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  void remove(const std::string& key) override;
  // Whether key exists now, without waiting for it.
  bool check(const std::string& key);

  // For a client that meant to serve this port itself and found it taken
  // (serve_or_join): without a token, nothing proves the server there is
  // the job's, and one run by another user of this machine (that
  // GANG_STORE_ALLOW_USERS does not name) is not: it took the port first.
  // Throws Denied then.
  void check_server_user();

  std::string host() const override { return host_; }
  int port() const override { return port_; }

  // A reply: its status and value (or message).
  struct Answer {
    tcp::Reply status = tcp::Reply::kOk;
    Bytes value;
    bool replied = false;  // a reply header arrived (the AUTH one included)
  };

 private:
  Answer call(tcp::Op op, const std::string& key, const uint8_t* value,
              size_t n, const detail::Deadline& deadline);
  // One request on fd (fresh: opened for it, so AUTH goes first). A
  // refusal by the server is kOk with answer->status kDenied, kRefused or
  // kBusy and the server's message as the value.
  net::Io exchange(int fd, bool fresh, tcp::Op op, const std::string& key,
                   const uint8_t* value, size_t n,
                   const detail::Deadline& deadline, Answer* answer);
  UniqueFd take_connection(const detail::Deadline& deadline, bool* fresh);
  std::string url() const;

  // Declared first so it is destroyed last, after the connections to it.
  std::unique_ptr<TcpStoreServer> server_;
  std::string host_;
  std::string dial_host_;
  int port_;
  std::string token_;
  // A call takes a connection for its whole exchange, so a get parked on
  // the server never blocks another thread's set on the same store.
  net::ConnectionPool pool_;
};

}  // namespace gang::store
