// An in-process store: threads of one process (the fake gang, tests)
// rendezvous through a table named in the url.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace gang::store {

class MemoryStore : public Store {
 public:
  // Every store opened with the same name shares one table, which lives as
  // long as the process: like a file or tcp store, reopening the name finds
  // the keys set earlier (gang generations count on that).
  MemoryStore(const std::string& name, Millis timeout);

  void set(const std::string& key, const Bytes& value) override;
  using Store::get;
  using Store::wait;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  void remove(const std::string& key) override;

 private:
  struct Table;
  static std::shared_ptr<Table> table_named(const std::string& name);

  std::shared_ptr<Table> table_;
};

}  // namespace gang::store
