// A store in a directory, one file per key: processes that share a file
// system (one node, or NFS) rendezvous without a server.
#pragma once

#include <string>
#include <vector>

#include "store/store.h"

namespace gang::store {

class FileStore : public Store {
 public:
  // Creates dir, with its parents, when missing; throws kSystem when it
  // cannot.
  FileStore(std::string dir, Millis timeout);

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  using Store::wait;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  void remove(const std::string& key) override;

  const std::string& dir() const { return dir_; }

 private:
  struct Location;
  Location locate(const std::string& key) const;
  // false when the key is missing.
  bool read(const std::string& key, Bytes* value) const;
  bool exists(const std::string& key) const;
  void write(const std::string& key, const Bytes& value) const;

  std::string dir_;
};

}  // namespace gang::store
