// The rendezvous key-value store interface and its factory.
//
// Every blocking call waits at most the store's timeout and then throws
// gang::Error(kTimeout). An unreachable or misbehaving server throws
// gang::Error(kStore); local I/O failures throw gang::Error(kSystem).
// Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "store/store_options.h"

namespace gang::store {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for key, then returns its value.
  Bytes get(const std::string& key) { return get(key, timeout_); }
  // The same, waiting at most `timeout` rather than the store's own.
  virtual Bytes get(const std::string& key, Millis timeout) = 0;
  // The values of keys, in order, as a get of each would return them, up to
  // the first key that did not come within `timeout` (one for all): fewer
  // values than keys when one was late. In as few exchanges with a server
  // as the store can make (the TCP store sends its gets in windows, so a
  // rendezvous reads a thousand ranks' records in a few round trips).
  // Throws as get does for anything but a key that did not come.
  virtual std::vector<Bytes> get_many(const std::vector<std::string>& keys, Millis timeout);
  // Every key's value, as get_many reads them, or the failure of a get of
  // the first key that did not come within `timeout`.
  std::vector<Bytes> get_all(const std::vector<std::string>& keys, Millis timeout);
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
  // The key and value limits this store checks (GANG_STORE_MAX_KEY_BYTES
  // and GANG_STORE_MAX_VALUE_BYTES as they were when it was opened).
  const Limits& limits() const { return limits_; }

  // Checks a key (not empty, at most limits().max_key_bytes) and a value's
  // size against limits().max_value_bytes before anything is read or sent;
  // throw kInvalidArgument.
  void check_key(const std::string& key) const;
  void check_value_size(const std::string& key, size_t n) const;

 protected:
  // Reads the limits from the environment: throws kInvalidArgument naming a
  // malformed GANG_STORE_* variable.
  explicit Store(Millis timeout)
      : timeout_(timeout), limits_(limits_from_env()) {}

  void check_value(const std::string& key, const Bytes& value) const {
    check_value_size(key, value.size());
  }

 private:
  Millis timeout_;
  Limits limits_;
};

// Opens "tcp://host:port[?token=T]" (server or client), "torch://host:port"
// (a client of PyTorch's TCPStore, see torch_store.h),
// "redis://host:port[/prefix]" (keys kept in a Redis server, see
// redis_store.h), "file:///dir" or "memory://name". A tcp server also
// answers the calls above itself.
// Throws gang::Error(kInvalidArgument) for a malformed url or a timeout that
// is not positive.
//
// tcp: a server listens on exactly the host it is given (every address a
// name resolves to; 0.0.0.0 or [::] for every interface; port 0 picks a free
// one, read it with port()); a client retries its connection until the
// timeout, since the server may start later. The token (?token=, else
// GANG_STORE_TOKEN) is required of every client by a server, and presented
// by a client; the other limits come from the GANG_STORE_* variables (see
// store_options.h). file: one file per key in the directory, created if
// missing; safe across processes. memory: the keys live as long as the
// process, shared by every store opened with that name.
// is_server only matters for tcp; torch stores are clients only (is_server
// is kInvalidArgument).
std::shared_ptr<Store> open(const std::string& url, bool is_server,
                            Millis timeout);

// For "tcp://host:port": serves the port, unless another socket already
// listens on it (a launcher such as gangrun hosting the store), in which case
// it connects to that server as a client, whose PING checks it is a gang
// store (kStore or kTimeout if not). *served (may be null) tells which.
// bind_host, when not empty, is what the server binds instead of the url's
// host ("0.0.0.0": every interface); clients still talk to the url's host.
// `ranks` (0: not known) sizes the server's connection limits for a job of
// that many ranks (limits_from_env).
std::shared_ptr<Store> serve_or_join(const std::string& url, Millis timeout,
                                     bool* served,
                                     const std::string& bind_host = "", int ranks = 0);

// What a tcp:// client throws (a kStore error) when the server refuses its
// token, or its lack of one: retrying will not help.
class Denied : public Error {
 public:
  using Error::Error;
};

// A client of gang's TCP store at host:port that presents `token` ("": none)
// whatever the environment says; as open("tcp://host:port", false, timeout)
// otherwise.
std::shared_ptr<Store> connect_tcp(const std::string& host, int port,
                                   Millis timeout, const std::string& token);

// Prefixes every key with `prefix` (which should end in '/') and forwards to
// an inner store; the rest of the interface is the inner store's.
std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix);
// The same, with waits bounded by `timeout` instead of the inner store's.
std::shared_ptr<Store> with_prefix(std::shared_ptr<Store> inner,
                                   const std::string& prefix, Millis timeout);

// A store whose operations are the caller's (gang_store_create_callbacks:
// another library's store, such as torch.distributed's, reached through
// it). Each returns kOk, or an error status with its message in *why; the
// store throws gang::Error with that status and message. check and wait
// may be empty: wait then polls check, or get, until the timeout. release,
// if set, runs once, when the store is destroyed.
struct Callbacks {
  std::function<Status(const std::string& key, const Bytes& value, std::string* why)> set;
  std::function<Status(const std::string& key, Millis timeout, Bytes* value, std::string* why)>
      get;
  std::function<Status(const std::string& key, int64_t delta, int64_t* sum, std::string* why)>
      add;
  std::function<Status(const std::vector<std::string>& keys, bool* exist, std::string* why)>
      check;
  std::function<Status(const std::vector<std::string>& keys, Millis timeout, std::string* why)>
      wait;
  std::function<Status(const std::string& key, std::string* why)> remove;
  std::function<void()> release;
};
// Throws kInvalidArgument if set, get, add or remove is empty, or the
// timeout is not positive.
std::shared_ptr<Store> from_callbacks(Callbacks callbacks, Millis timeout);

// The url for messages and logs: a "token=..." in it is replaced by
// "token=***". Messages never show a token; callers that print a url they
// were given should print this instead.
std::string redact_url(const std::string& url);

}  // namespace gang::store
