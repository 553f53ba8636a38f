// A view of another store with every key under a prefix, so layers that
// share one store (gangs, generations, backends) cannot collide.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace gang::store {

class PrefixStore : public Store {
 public:
  // Waits (get, wait) last at most `timeout`, which may differ from the
  // inner store's: a gang bounds its rendezvous by its own timeout.
  PrefixStore(std::shared_ptr<Store> inner, std::string prefix, Millis timeout);

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  using Store::wait;
  Bytes get(const std::string& key, Millis timeout) override;
  std::vector<Bytes> get_many(const std::vector<std::string>& keys, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  void remove(const std::string& key) override;

  std::string host() const override { return inner_->host(); }
  int port() const override { return inner_->port(); }

  const std::string& prefix() const { return prefix_; }

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }

  std::shared_ptr<Store> inner_;
  std::string prefix_;
};

}  // namespace gang::store
