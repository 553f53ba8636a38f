// A client of PyTorch's TCPStore (torch.distributed.TCPStore), the store
// torchrun's agent serves on MASTER_ADDR:MASTER_PORT. Under torchrun that
// port is taken, so gang rendezvouses through the agent's store instead of
// serving its own ("torch://host:port").
//
// It speaks both generations of TCPStore's wire protocol (see
// torch_protocol.h): PyTorch 2.2 and later, with its validation handshake
// and its classic or libuv server, and PyTorch 1.x to 2.1. Opening the store
// asks the current generation first, in a way a legacy server refuses at
// once and harmlessly, then the legacy one; the generation that answers is
// used for every later connection. A server that answers neither is a kStore
// error naming the versions tried.
//
// GET of a missing key makes a legacy server drop the connection and a libuv
// server answer an empty value, so GET is always preceded by WAIT on the same
// connection. A wait that times out cancels itself on a current server
// (CANCEL_WAIT) and keeps its connection; on a legacy server, or when the
// cancel is not answered promptly, the connection is dropped: a reply
// arriving later on it must not answer another request. Either way the store
// goes on working.
//
// Every key K is stored as "/gang/K": PyTorch's own clients add "/" in front
// of their keys, so gang's keys sit in a namespace of their own beside
// torch.distributed's, and a PyTorch program sees them as "gang/K". Values
// sent to a current server are limited to 8 MiB, the libuv server's limit.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "store/socket_io.h"
#include "store/store.h"
#include "store/torch_protocol.h"

namespace gang::store {

class TorchStore : public Store {
 public:
  // Connects, retrying until the timeout since the agent may start later,
  // and finds which protocol the server speaks; throws kStore naming the url
  // and the versions tried when no TCPStore answers.
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

  // The protocol generation the server answered in.
  torch_wire::Generation generation() const { return generation_; }

  static constexpr const char* kKeyPrefix = "/gang/";

 private:
  class Exchange;
  std::string url() const;
  uint8_t type(torch_wire::Query q) const {
    return torch_wire::query_type(generation_, q);
  }
  // Sends WAIT for one wire key on x and reads its reply.
  void wait_one(Exchange& x, const std::string& wire_key);
  // DELETE_KEY's type byte, found out the first time on a legacy server.
  uint8_t delete_type(const std::string& key, const base::Deadline& deadline);

  std::string host_;
  int port_;
  net::ConnectionPool pool_;
  torch_wire::Generation generation_ = torch_wire::Generation::kCurrent;
  // Legacy DELETE_KEY: 0 until known.
  std::atomic<uint8_t> legacy_delete_{0};
  std::mutex legacy_delete_mu_;
};

}  // namespace gang::store
