// A view of another store that remembers the keys written through it, so
// whoever handed it to a layer (a backend's rendezvous) can forget exactly
// those keys once the layer is done with them.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/store.h"

namespace gang::store {

class RecordingStore : public Store {
 public:
  explicit RecordingStore(std::shared_ptr<Store> inner);

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

  // The store it views.
  const std::shared_ptr<Store>& inner() const { return inner_; }
  // The keys set or added through it so far, each once, in first-write
  // order (less those removed through it).
  std::vector<std::string> written() const;

 private:
  void note(const std::string& key);

  std::shared_ptr<Store> inner_;
  mutable std::mutex mu_;
  std::vector<std::string> written_;
};

}  // namespace gang::store
