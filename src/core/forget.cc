#include "core/forget.h"

#include <thread>

#include "base/error.h"
#include "store/store.h"

namespace gang::core {

void forget(std::shared_ptr<store::Store> store, std::vector<std::string> keys,
            std::vector<std::pair<std::string, std::string>> counted) {
  if (!store) return;
  try {
    std::thread([store = std::move(store), keys = std::move(keys),
                 counted = std::move(counted)] {
      try {
        for (const std::string& k : keys) store->remove(k);
        for (const auto& [counter, item] : counted) {
          const int64_t n = store->add(counter, 0);
          for (int64_t i = 1; i <= n; ++i) store->remove(str_cat(item, i));
          store->remove(counter);
        }
      } catch (...) {
        // The store is slow or gone: what is left stays.
      }
    }).detach();
  } catch (...) {
    // No thread: the keys stay.
  }
}

}  // namespace gang::core
