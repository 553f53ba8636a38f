// gang_store_callbacks_t's C functions as the store layer's Callbacks: the
// message buffer each call fills, the status mapped, get's malloc'd value
// copied and freed, the key lists as arrays of C strings.
#include <cstdlib>
#include <cstring>

#include "abi/shim.h"

namespace gang::abi {

namespace {

constexpr size_t kMessage = 1024;

Status from_public(gang_status_t s) { return static_cast<Status>(static_cast<int>(s)); }

// Runs one callback with a fresh message buffer; its status, the text in
// *why.
template <typename Call>
Status call(std::string* why, Call&& fn) {
  char err[kMessage];
  err[0] = '\0';
  const gang_status_t st = fn(err, sizeof err);
  err[kMessage - 1] = '\0';
  *why = err;
  return from_public(st);
}

std::vector<const char*> c_strings(const std::vector<std::string>& keys) {
  std::vector<const char*> v;
  v.reserve(keys.size());
  for (const auto& k : keys) v.push_back(k.c_str());
  return v;
}

}  // namespace

store::Callbacks store_callbacks(const gang_store_callbacks_t& c) {
  store::Callbacks cb;
  cb.set = [c](const std::string& key, const store::Bytes& value, std::string* why) {
    return call(why, [&](char* err, size_t len) {
      return c.set(c.ctx, key.c_str(), value.empty() ? nullptr : value.data(), value.size(), err,
                   len);
    });
  };
  cb.get = [c](const std::string& key, store::Millis timeout, store::Bytes* value,
               std::string* why) {
    void* data = nullptr;
    size_t n = 0;
    const Status st = call(why, [&](char* err, size_t len) {
      return c.get(c.ctx, key.c_str(), timeout.count() > 0 ? timeout.count() : 1, &data, &n, err,
                   len);
    });
    if (st == Status::kOk && data == nullptr && n != 0) {
      *why = "get returned GANG_OK with a NULL value of " + std::to_string(n) + " bytes";
      return Status::kStore;
    }
    if (st == Status::kOk) {
      const auto* p = static_cast<const uint8_t*>(data);
      value->assign(p, p + n);
    }
    std::free(data);
    return st;
  };
  cb.add = [c](const std::string& key, int64_t delta, int64_t* sum, std::string* why) {
    return call(why, [&](char* err, size_t len) { return c.add(c.ctx, key.c_str(), delta, sum, err, len); });
  };
  cb.remove = [c](const std::string& key, std::string* why) {
    return call(why, [&](char* err, size_t len) { return c.remove(c.ctx, key.c_str(), err, len); });
  };
  if (c.check != nullptr) {
    cb.check = [c](const std::vector<std::string>& keys, bool* exist, std::string* why) {
      const auto list = c_strings(keys);
      int all = 0;
      const Status st = call(why, [&](char* err, size_t len) {
        return c.check(c.ctx, list.data(), list.size(), &all, err, len);
      });
      *exist = all != 0;
      return st;
    };
  }
  if (c.wait != nullptr) {
    cb.wait = [c](const std::vector<std::string>& keys, store::Millis timeout, std::string* why) {
      const auto list = c_strings(keys);
      return call(why, [&](char* err, size_t len) {
        return c.wait(c.ctx, list.data(), list.size(), timeout.count() > 0 ? timeout.count() : 1,
                      err, len);
      });
    };
  }
  if (c.release != nullptr) cb.release = [c] { c.release(c.ctx); };
  return cb;
}

}  // namespace gang::abi
