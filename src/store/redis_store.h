// A store kept in a Redis server ("redis://host:port[/prefix]"), for
// clusters that already run one. gang speaks RESP2 itself, so it needs no
// client library: every command is an array of bulk strings, and a reply is
// a status (+), an error (-), an integer (:) or a bulk string ($, -1: none).
//
//   set    SET key value
//   get    GET key, polled until it is not nil
//   add    INCRBY key delta  (Redis keeps the decimal string gang_store_get
//                             reads, and rejects a value that is not one)
//   wait   EXISTS key, polled
//   remove DEL key
//
// get and wait poll with a backoff from 1 ms to 100 ms instead of blocking
// on the server (BLPOP and keyspace notifications would need list values or
// server configuration): rendezvous keys arrive within milliseconds, and a
// slow poll costs the server one cheap command per waiting rank and tick.
//
// Keys are stored as the optional prefix from the url followed by the key,
// so jobs sharing one Redis can keep apart ("redis://db:6379/job42/" stores
// "gang/root/joined" as "job42/gang/root/joined"). Redis keys are binary-
// safe, so any gang key is a Redis key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/socket_io.h"
#include "store/store.h"

namespace gang::store {

class RedisStore : public Store {
 public:
  // Connects, retrying until the timeout since the server may start later,
  // and checks with PING that Redis answers; throws kStore naming the url
  // when it does not.
  RedisStore(std::string host, int port, std::string key_prefix,
             Millis timeout);

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

 private:
  struct Reply;
  // Sends one command and reads its reply; throws naming op and key.
  Reply command(const char* op, const std::string& key,
                const std::vector<std::string>& args, const Bytes* value,
                const detail::Deadline& deadline);
  bool exists(const std::string& key, const detail::Deadline& deadline,
              const char* op);
  std::string url() const;

  std::string host_;
  int port_;
  std::string prefix_;
  net::ConnectionPool pool_;
};

}  // namespace gang::store
