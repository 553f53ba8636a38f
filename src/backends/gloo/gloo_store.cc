#include "backends/gloo/gloo_store.h"

namespace gang::backends::gloo_impl {

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, store::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  const store::Bytes v = store_->get(key);
  return std::vector<char>(v.begin(), v.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  store_->wait(keys);
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds&) {
  store_->wait(keys);
}

}  // namespace gang::backends::gloo_impl
