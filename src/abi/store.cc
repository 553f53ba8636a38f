// gang_store_*: the rendezvous store.
#include <cstdlib>
#include <cstring>

#include "abi/shim.h"
#include "core/env.h"
#include "core/log.h"

using gang::Status;
using gang::abi::out_arg;
using gang::abi::pin_store;

namespace {

const char* key_arg(const char* key, const char* api) {
  if (key == nullptr)
    gang::fail(Status::kInvalidArgument, api, ": key is NULL");
  return key;
}

}  // namespace

extern "C" {

GANG_API gang_status_t gang_store_create(const char* url, int is_server,
                                         int64_t timeout_ms,
                                         gang_store_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_create";
  out_arg(out, api, "out");
  *out = nullptr;
  if (url == nullptr)
    gang::fail(Status::kInvalidArgument, api, ": url is NULL");
  const auto timeout = timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms)
                                      : gang::core::env::timeout();
  if (is_server != 0) gang::core::route_store_server_log();
  *out = gang::abi::store_table().insert(
      gang::store::open(url, is_server != 0, timeout));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_create_callbacks(const gang_store_callbacks_t* callbacks,
                                                   int64_t timeout_ms, gang_store_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_create_callbacks";
  out_arg(out, api, "out");
  *out = nullptr;
  if (callbacks == nullptr) gang::fail(Status::kInvalidArgument, api, ": callbacks is NULL");
  constexpr size_t kFirst = offsetof(gang_store_callbacks_t, release) + sizeof callbacks->release;
  if (callbacks->struct_size < kFirst) {
    gang::fail(Status::kInvalidArgument, api, ": callbacks->struct_size ",
               callbacks->struct_size, " is smaller than gang_store_callbacks_t (", kFirst,
               "): set it to sizeof(gang_store_callbacks_t)");
  }
  const gang_store_callbacks_t c = *callbacks;
  const char* missing = c.set == nullptr      ? "set"
                        : c.get == nullptr    ? "get"
                        : c.add == nullptr    ? "add"
                        : c.remove == nullptr ? "remove"
                                              : nullptr;
  if (missing != nullptr) {
    gang::fail(Status::kInvalidArgument, api, ": callbacks->", missing, " is NULL");
  }
  const auto timeout = timeout_ms > 0 ? std::chrono::milliseconds(timeout_ms)
                                      : gang::core::env::timeout();
  *out = gang::abi::store_table().insert(
      gang::store::from_callbacks(gang::abi::store_callbacks(c), timeout));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_destroy(gang_store_t* store) {
  GANG_ABI_TRY
  if (store == nullptr) return GANG_OK;
  // Closed when the last call still running with it returns (and gangs
  // made with it hold their own reference).
  gang::abi::store_table().remove(store, "gang_store_destroy");
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API int gang_store_port(const gang_store_t* store) {
  try {
    return pin_store(store, "gang_store_port")->port();
  } catch (...) {
    return -1;
  }
}

GANG_API gang_status_t gang_store_set(gang_store_t* store, const char* key,
                                      const void* value, size_t n) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_set";
  const auto s = pin_store(store, api);
  key_arg(key, api);
  if (value == nullptr && n != 0) {
    gang::fail(Status::kInvalidArgument, api, ": value is NULL with n ", n);
  }
  // Before a byte is read: n may claim more than value holds.
  const size_t limit = s->limits().max_value_bytes;
  if (n > limit) {
    gang::fail(Status::kInvalidArgument, api, ": n ", n,
               " is over the store's value limit of ", limit, " bytes",
               limit < gang::store::kMaxValueBytes
                   ? " (GANG_STORE_MAX_VALUE_BYTES)"
                   : "");
  }
  const auto* p = static_cast<const uint8_t*>(value);
  s->set(key, gang::store::Bytes(p, p + n));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_get(gang_store_t* store, const char* key,
                                      void** value, size_t* n) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_get";
  const auto s = pin_store(store, api);
  key_arg(key, api);
  out_arg(value, api, "value");
  out_arg(n, api, "n");
  *value = nullptr;
  *n = 0;
  const gang::store::Bytes v = s->get(key);
  void* copy = std::malloc(v.empty() ? 1 : v.size());
  if (!copy)
    gang::fail(Status::kNoMemory, api, ": cannot allocate ", v.size(),
               " bytes");
  if (!v.empty()) std::memcpy(copy, v.data(), v.size());
  *value = copy;
  *n = v.size();
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_add(gang_store_t* store, const char* key,
                                      int64_t delta, int64_t* out) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_add";
  const auto s = pin_store(store, api);
  key_arg(key, api);
  const int64_t v = s->add(key, delta);
  if (out) *out = v;
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_wait(gang_store_t* store,
                                       const char* const* keys, size_t nkeys) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_wait";
  const auto s = pin_store(store, api);
  if (keys == nullptr && nkeys != 0) {
    gang::fail(Status::kInvalidArgument, api, ": keys is NULL with nkeys ",
               nkeys);
  }
  std::vector<std::string> list;
  for (size_t i = 0; i < nkeys; ++i) {
    if (keys[i] == nullptr) {
      gang::fail(Status::kInvalidArgument, api, ": keys[", i, "] is NULL");
    }
    list.emplace_back(keys[i]);
  }
  if (!list.empty()) s->wait(list);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_store_delete(gang_store_t* store, const char* key) {
  GANG_ABI_TRY
  static const char* const api = "gang_store_delete";
  const auto s = pin_store(store, api);
  s->remove(key_arg(key, api));
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
