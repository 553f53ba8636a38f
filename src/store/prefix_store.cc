#include "store/prefix_store.h"

#include <utility>

namespace gang::store {

// Keys are checked as given (an empty key stays an error under a prefix) and
// again by the inner store as prefixed, so a prefix that pushes a key over
// the limit is reported with the key the store actually saw.
PrefixStore::PrefixStore(std::shared_ptr<Store> inner, std::string prefix,
                         Millis timeout)
    : Store(timeout), inner_(std::move(inner)), prefix_(std::move(prefix)) {}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  inner_->set(full(key), value);
}

Bytes PrefixStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  return inner_->get(full(key), timeout);
}

std::vector<Bytes> PrefixStore::get_many(const std::vector<std::string>& keys,
                                         Millis timeout) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& key : keys) {
    check_key(key);
    full_keys.push_back(full(key));
  }
  return inner_->get_many(full_keys, timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  return inner_->add(full(key), delta);
}

void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::vector<std::string> full_keys;
  full_keys.reserve(keys.size());
  for (const auto& key : keys) {
    check_key(key);
    full_keys.push_back(full(key));
  }
  inner_->wait(full_keys, timeout);
}

void PrefixStore::remove(const std::string& key) {
  check_key(key);
  inner_->remove(full(key));
}

}  // namespace gang::store
