#include "store/recording_store.h"

#include <algorithm>
#include <utility>

namespace gang::store {

RecordingStore::RecordingStore(std::shared_ptr<Store> inner)
    : Store(inner->timeout()), inner_(std::move(inner)) {}

void RecordingStore::note(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(written_.begin(), written_.end(), key) == written_.end()) {
    written_.push_back(key);
  }
}

void RecordingStore::set(const std::string& key, const Bytes& value) {
  note(key);
  inner_->set(key, value);
}

Bytes RecordingStore::get(const std::string& key, Millis timeout) {
  return inner_->get(key, timeout);
}

int64_t RecordingStore::add(const std::string& key, int64_t delta) {
  note(key);
  return inner_->add(key, delta);
}

std::vector<Bytes> RecordingStore::get_many(const std::vector<std::string>& keys,
                                            Millis timeout) {
  return inner_->get_many(keys, timeout);
}

void RecordingStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  inner_->wait(keys, timeout);
}

void RecordingStore::remove(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    written_.erase(std::remove(written_.begin(), written_.end(), key), written_.end());
  }
  inner_->remove(key);
}

std::vector<std::string> RecordingStore::written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

}  // namespace gang::store
