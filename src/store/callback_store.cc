// The store of gang_store_create_callbacks: every operation is one of the
// caller's callbacks (store.h, Callbacks). What gang asks of a store that
// the caller may not offer, waiting for several keys, is built from what it
// does: its check, else its get, per key, within the timeout.
#include <chrono>
#include <memory>
#include <thread>

#include "store/store.h"

namespace gang::store {

namespace {

class CallbackStore final : public Store,
                            public std::enable_shared_from_this<CallbackStore> {
 public:
  CallbackStore(Callbacks cb, Millis timeout) : Store(timeout), cb_(std::move(cb)) {}
  ~CallbackStore() override {
    if (cb_.release) cb_.release();
  }

  void set(const std::string& key, const Bytes& value) override {
    const auto alive = keep();
    check_key(key);
    check_value(key, value);
    std::string why;
    done("set", key, cb_.set(key, value, &why), why);
  }

  Bytes get(const std::string& key, Millis timeout) override {
    const auto alive = keep();
    check_key(key);
    Bytes value;
    std::string why;
    done("get", key, cb_.get(key, timeout, &value, &why), why);
    return value;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    const auto alive = keep();
    check_key(key);
    int64_t sum = 0;
    std::string why;
    done("add", key, cb_.add(key, delta, &sum, &why), why);
    return sum;
  }

  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    const auto alive = keep();
    for (const auto& k : keys) check_key(k);
    std::string why;
    if (cb_.wait) {
      done("wait", keys.empty() ? "" : keys.front(), cb_.wait(keys, timeout, &why), why);
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (!cb_.check) {
      // Each key's get, with what is left of the timeout.
      for (const auto& k : keys) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
        get(k, std::max(left, Millis(1)));
      }
      return;
    }
    for (auto pause = Millis(1);; pause = std::min(pause * 2, Millis(50))) {
      bool exist = false;
      done("check", keys.empty() ? "" : keys.front(), cb_.check(keys, &exist, &why), why);
      if (exist) return;
      if (std::chrono::steady_clock::now() >= deadline) {
        fail(Status::kTimeout, "store (callbacks): wait: the keys did not all appear within ",
             timeout.count(), " ms (first: \"", keys.front(), "\")");
      }
      std::this_thread::sleep_for(pause);
    }
  }

  void remove(const std::string& key) override {
    const auto alive = keep();
    check_key(key);
    std::string why;
    done("remove", key, cb_.remove(key, &why), why);
  }

 private:
  // The store itself, for the length of one operation: a callback that
  // destroys its own store (its last handle) leaves the release to the end
  // of the operation, never inside the callback.
  std::shared_ptr<CallbackStore> keep() { return shared_from_this(); }

  // Throws a callback's error, saying which call on which key it was. A
  // store answers ok, timeout (get, wait) or a store error; any other
  // status (GANG_IN_PROGRESS, a peer's, a number gang has no name for) is
  // a store error too, naming what the callback said.
  static void done(const char* call, const std::string& key, Status st, const std::string& why) {
    if (st == Status::kOk) return;
    const int value = static_cast<int>(st);
    const bool known = value >= static_cast<int>(Status::kInternal) &&
                       value <= static_cast<int>(Status::kInProgress);
    if (st == Status::kTimeout || st == Status::kStore) {
      fail(st, "store (callbacks): ", call, " \"", key, "\": ",
           why.empty() ? std::string(status_name(st)) : why);
    }
    fail(Status::kStore, "store (callbacks): ", call, " \"", key, "\": the callback returned ",
         known ? std::string(status_name(st)) : str_cat("status ", value),
         ", which a store's callback does not", why.empty() ? "" : ": ", why);
  }

  Callbacks cb_;
};

}  // namespace

std::shared_ptr<Store> from_callbacks(Callbacks callbacks, Millis timeout) {
  if (!callbacks.set || !callbacks.get || !callbacks.add || !callbacks.remove) {
    fail(Status::kInvalidArgument, "a store of callbacks needs set, get, add and remove");
  }
  if (timeout.count() <= 0) {
    fail(Status::kInvalidArgument, "a store's timeout must be positive, not ", timeout.count(),
         " ms");
  }
  return std::make_shared<CallbackStore>(std::move(callbacks), timeout);
}

}  // namespace gang::store
