#include "store.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <c10/util/Exception.h>

#include "errors.h"

namespace gang_torch {
namespace {

struct Context {
  c10::intrusive_ptr<c10d::Store> store;
};

c10d::Store& store_of(void* ctx) { return *static_cast<Context*>(ctx)->store; }

void say(char* err, size_t err_len, const char* what) {
  if (err != nullptr && err_len > 0) {
    std::strncpy(err, what, err_len - 1);
    err[err_len - 1] = '\0';
  }
}

// Runs fn, turning any exception into GANG_ERR_STORE with its message: no
// exception may leave a callback.
template <typename Fn>
gang_status_t guarded(char* err, size_t err_len, Fn&& fn) {
  try {
    return fn();
  } catch (const c10::Error& e) {
    say(err, err_len, e.what_without_backtrace());
  } catch (const std::exception& e) {
    say(err, err_len, e.what());
  } catch (...) {
    say(err, err_len, "unknown exception from the torch store");
  }
  return GANG_ERR_STORE;
}

// Waits until every key exists. A store's wait throws when it runs out,
// with a type and text that differ between stores and releases; whether it
// ran out is then read from the store itself (are the keys there?), never
// from the text. Keys that are there by then came just after the wait
// gave up: the wait is done, not failed (a rank 0 reading the hellos with
// a short wait once failed the job's creation on that).
gang_status_t wait_keys(c10d::Store& store, const std::vector<std::string>& keys,
                        int64_t timeout_ms) {
  try {
    store.wait(keys, std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 1));
    return GANG_OK;
  } catch (const std::exception&) {
    return store.check(keys) ? GANG_OK : GANG_ERR_TIMEOUT;
  }
}

gang_status_t do_set(void* ctx, const char* key, const void* value, size_t n, char* err,
                     size_t err_len) {
  return guarded(err, err_len, [&] {
    const auto* bytes = static_cast<const uint8_t*>(value);
    store_of(ctx).set(key, std::vector<uint8_t>(bytes, bytes + n));
    return GANG_OK;
  });
}

gang_status_t do_get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* n,
                     char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    gang_status_t waited = wait_keys(store_of(ctx), {key}, timeout_ms);
    if (waited != GANG_OK) return waited;
    std::vector<uint8_t> bytes = store_of(ctx).get(key);
    void* copy = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (copy == nullptr) return GANG_ERR_NO_MEMORY;
    if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
    *value = copy;
    *n = bytes.size();
    return GANG_OK;
  });
}

gang_status_t do_add(void* ctx, const char* key, int64_t delta, int64_t* out, char* err,
                     size_t err_len) {
  return guarded(err, err_len, [&] {
    *out = store_of(ctx).add(key, delta);
    return GANG_OK;
  });
}

gang_status_t do_remove(void* ctx, const char* key, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    store_of(ctx).deleteKey(key);
    return GANG_OK;
  });
}

gang_status_t do_check(void* ctx, const char* const* keys, size_t nkeys, int* exist, char* err,
                       size_t err_len) {
  return guarded(err, err_len, [&] {
    *exist = store_of(ctx).check(std::vector<std::string>(keys, keys + nkeys)) ? 1 : 0;
    return GANG_OK;
  });
}

gang_status_t do_wait(void* ctx, const char* const* keys, size_t nkeys, int64_t timeout_ms,
                      char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    return wait_keys(store_of(ctx), std::vector<std::string>(keys, keys + nkeys), timeout_ms);
  });
}

void do_release(void* ctx) { delete static_cast<Context*>(ctx); }

}  // namespace

StoreHandle::StoreHandle(c10::intrusive_ptr<c10d::Store> store, int64_t timeout_ms) {
  gang_store_callbacks_t callbacks{};
  callbacks.struct_size = sizeof callbacks;
  callbacks.ctx = new Context{std::move(store)};
  callbacks.set = do_set;
  callbacks.get = do_get;
  callbacks.add = do_add;
  callbacks.remove = do_remove;
  callbacks.check = do_check;
  callbacks.wait = do_wait;
  callbacks.release = do_release;
  gang_status_t status = gang_store_create_callbacks(&callbacks, timeout_ms, &handle_);
  if (status != GANG_OK) {
    delete static_cast<Context*>(callbacks.ctx);
    raise(status, "the process group's store");
  }
}

StoreHandle::~StoreHandle() { gang_store_destroy(handle_); }

gang_t* meet(const StoreHandle& store, int rank, int size, int64_t timeout_ms,
             const std::string& name, int cuda_device) {
  gang_options_t options;
  gang_options_init(&options);
  options.rank = rank;
  options.size = size;
  options.store = store.get();
  options.timeout_ms = timeout_ms;
  options.name = name.c_str();
  if (cuda_device >= 0) {
    options.backend = "nccl";
    options.device_type = GANG_DEVICE_CUDA;
    options.device_index = cuda_device;
  }
  gang_t* gang = nullptr;
  check(gang_create(&options, &gang), cuda_device >= 0 ? "creating the process group's CUDA gang"
                                                       : "creating the process group's gang");
  return gang;
}

}  // namespace gang_torch
