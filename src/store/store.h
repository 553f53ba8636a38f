// The rendezvous key-value store interface and its factory.
//
// Every blocking call waits at most the store's timeout and then throws
// gang::Error(kTimeout). An unreachable or misbehaving server throws
// gang::Error(kStore); local I/O failures throw gang::Error(kSystem).
// Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gang::store {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

// Limits every implementation enforces, so a value accepted by one store is
// accepted by all.
constexpr size_t kMaxKeyBytes = 4096;
constexpr size_t kMaxValueBytes = size_t{1} << 30;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for key, then returns its value.
  Bytes get(const std::string& key) { return get(key, timeout_); }
  // The same, waiting at most `timeout` rather than the store's own.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // Adds delta to the decimal integer at key (missing: 0); returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  // Deleting a missing key is not an error.
  virtual void remove(const std::string& key) = 0;

  // The host a tcp:// store talks to ("" for others): the network interface
  // that reaches it is the one a backend should use.
  virtual std::string host() const { return ""; }
  // The TCP port served or talked to; -1 for other stores.
  virtual int port() const { return -1; }

  Millis timeout() const { return timeout_; }

 protected:
  explicit Store(Millis timeout) : timeout_(timeout) {}

 private:
  Millis timeout_;
};

// Opens "tcp://host:port" (server or client), "torch://host:port" (a client
// of PyTorch's TCPStore, see torch_store.h), "redis://host:port[/prefix]"
// (keys kept in a Redis server, see redis_store.h), "file:///dir" or
// "memory://name". A tcp server also answers the calls above itself.
// Throws gang::Error(kInvalidArgument) for a malformed url or a timeout that
// is not positive.
//
// tcp: a server listens on every interface (port 0 picks a free one, read it
// with port()), since the address others use to reach this host is often not
// the one its own name resolves to; a client retries its connection until
// the timeout, since the server may start later. file: one file per key in
// the directory, created if missing; safe across processes. memory: the keys
// live as long as the process, shared by every store opened with that name.
// is_server only matters for tcp; torch stores are clients only (is_server
// is kInvalidArgument).
std::shared_ptr<Store> open(const std::string& url, bool is_server,
                            Millis timeout);

// For "tcp://host:port": serves the port, unless another socket already
// listens on it (a launcher such as gangrun hosting the store), in which case
// it connects to that server as a client, whose PING checks it is a gang
// store (kStore or kTimeout if not). *served (may be null) tells which.
std::shared_ptr<Store> serve_or_join(const std::string& url, Millis timeout,
                                     bool* served);

// Prefixes every key with `prefix` (which should end in '/') and forwards to
// an inner store; the rest of the interface is the inner store's.
std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix);
// The same, with waits bounded by `timeout` instead of the inner store's.
std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix, Millis timeout);

// Checks a key against the shared limits (not empty, at most kMaxKeyBytes);
// throws kInvalidArgument.
void check_key(const std::string& key);

// Checks a value to be stored at key against kMaxValueBytes; throws
// kInvalidArgument.
void check_value(const std::string& key, const Bytes& value);

}  // namespace gang::store
