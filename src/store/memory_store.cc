#include "store/memory_store.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <unordered_map>

#include "store/store_util.h"

namespace gang::store {

struct MemoryStore::Table {
  std::mutex mu;
  std::condition_variable changed;  // a key was set or added
  std::unordered_map<std::string, Bytes> data;
};

std::shared_ptr<MemoryStore::Table> MemoryStore::table_named(
    const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Table>> tables;
  std::lock_guard<std::mutex> lock(mu);
  auto& table = tables[name];
  if (!table) table = std::make_shared<Table>();
  return table;
}

MemoryStore::MemoryStore(const std::string& name, Millis timeout)
    : Store(timeout), table_(table_named(name)) {}

void MemoryStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  {
    std::lock_guard<std::mutex> lock(table_->mu);
    table_->data[key] = value;
  }
  table_->changed.notify_all();
}

Bytes MemoryStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  const detail::Deadline deadline(timeout);
  std::unique_lock<std::mutex> lock(table_->mu);
  auto& data = table_->data;
  if (!table_->changed.wait_until(lock, deadline.end(),
                                  [&] { return data.count(key) != 0; })) {
    detail::fail_missing("get", key, timeout);
  }
  return data.at(key);
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(table_->mu);
    auto it = table_->data.find(key);
    sum = detail::add_decimal(
        key, it == table_->data.end() ? nullptr : &it->second, delta);
    table_->data[key] = detail::decimal_bytes(sum);
  }
  table_->changed.notify_all();
  return sum;
}

void MemoryStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const detail::Deadline deadline(timeout);
  std::unique_lock<std::mutex> lock(table_->mu);
  auto& data = table_->data;
  for (const auto& key : keys) {
    if (!table_->changed.wait_until(lock, deadline.end(),
                                    [&] { return data.count(key) != 0; })) {
      detail::fail_missing("wait", key, timeout);
    }
  }
}

void MemoryStore::remove(const std::string& key) {
  check_key(key);
  std::lock_guard<std::mutex> lock(table_->mu);
  table_->data.erase(key);
}

}  // namespace gang::store
