#include "store/store_options.h"

#include <pwd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/secret.h"
#include "base/env.h"
#include "base/text.h"

namespace gang::store {

namespace {

// The variable's value, or nullptr when it is unset or empty.
const char* env(const char* name) { return base::env(name); }

// A decimal number in [lo, hi]; `unit` completes the message.
uint64_t number(const char* name, const char* text, uint64_t lo, uint64_t hi,
                const char* unit) {
  uint64_t v = 0;
  bool ok = *text != '\0';
  for (const char* p = text; ok && *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') {
      ok = false;
      break;
    }
    const auto digit = static_cast<uint64_t>(*p - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      ok = false;
      break;
    }
    v = v * 10 + digit;
  }
  if (!ok || v < lo || v > hi) {
    fail(Status::kInvalidArgument, name, "=\"", text, "\" is not a number of ",
         unit, " from ", lo, " to ", hi);
  }
  return v;
}

// A variable counting `unit` (bytes, connections), within [lo, hi].
size_t count_var(const char* name, size_t fallback, uint64_t lo, uint64_t hi,
                 const char* unit) {
  const char* v = env(name);
  return v == nullptr ? fallback : static_cast<size_t>(number(name, v, lo, hi, unit));
}

size_t bytes_var(const char* name, size_t fallback, uint64_t lo, uint64_t hi) {
  return count_var(name, fallback, lo, hi, "bytes");
}

Millis ms_var(const char* name, Millis fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  // Up to a century, as every other timeout of gang.
  return Millis(static_cast<int64_t>(
      number(name, v, 1, 100ULL * 365 * 24 * 3600 * 1000, "milliseconds")));
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
         c == '~' || c == '+' || c == '/' || c == '=';
}

}  // namespace

Limits limits_from_env(int ranks) {
  Limits l;
  const size_t n = ranks > 0 ? static_cast<size_t>(ranks) : 0;
  l.max_connections = std::max(l.max_connections, kConnectionsPerRank * n);
  l.max_pending_connections = std::max(l.max_pending_connections, n / 4);
  l.max_key_bytes =
      bytes_var("GANG_STORE_MAX_KEY_BYTES", l.max_key_bytes, 1, kMaxKeyBytes);
  l.max_value_bytes = bytes_var("GANG_STORE_MAX_VALUE_BYTES", l.max_value_bytes,
                                0, kMaxValueBytes);
  l.max_total_bytes = bytes_var("GANG_STORE_MAX_TOTAL_BYTES", l.max_total_bytes,
                                4096, uint64_t{1} << 62);
  l.max_request_bytes =
      bytes_var("GANG_STORE_MAX_REQUEST_BYTES",
                l.max_key_bytes + l.max_value_bytes, 1, uint64_t{1} << 62);
  l.max_connections = count_var("GANG_STORE_MAX_CONNECTIONS", l.max_connections, 1, 1 << 20,
                                "connections");
  l.max_pending_connections = count_var("GANG_STORE_MAX_PENDING_CONNECTIONS",
                                        l.max_pending_connections, 1, 1 << 20, "connections");
  l.auth_timeout = ms_var("GANG_STORE_AUTH_TIMEOUT_MS", l.auth_timeout);
  l.idle_timeout = ms_var("GANG_STORE_IDLE_TIMEOUT_MS", l.idle_timeout);
  l.request_timeout =
      ms_var("GANG_STORE_REQUEST_TIMEOUT_MS", l.request_timeout);
  return l;
}

void check_token(const std::string& token, const char* where) {
  if (token.size() > kMaxTokenBytes) {
    fail(Status::kInvalidArgument, where, ": the store token has ",
         token.size(), " bytes, over the limit of ", kMaxTokenBytes);
  }
  for (const char c : token) {
    if (!token_char(c)) {
      fail(Status::kInvalidArgument, where,
           ": the store token may hold only letters, digits and -._~+/=");
    }
  }
}

namespace {

// A user named in GANG_STORE_ALLOW_USERS (whose whole value is `all`): a
// uid, or a name the system knows.
uid_t user_id(const std::string& word, const std::string& all) {
  if (word == "any" || word == "*") {
    fail(Status::kInvalidArgument, "GANG_STORE_ALLOW_USERS=\"", all, "\": \"", word,
         "\" allows every user, so it stands alone; to allow some users, list their "
         "names or uids separated by commas");
  }
  bool digits = !word.empty() && word.size() <= 10;
  for (const char c : word) digits = digits && c >= '0' && c <= '9';
  if (digits) {
    const unsigned long v = std::strtoul(word.c_str(), nullptr, 10);
    if (v < static_cast<unsigned long>(static_cast<uid_t>(-1))) {
      return static_cast<uid_t>(v);
    }
  }
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (!word.empty() &&
      ::getpwnam_r(word.c_str(), &pw, buf.data(), buf.size(), &found) == 0 &&
      found != nullptr) {
    return pw.pw_uid;
  }
  fail(Status::kInvalidArgument, "GANG_STORE_ALLOW_USERS=\"", all, "\": \"", word,
       "\" is neither a uid nor a user of this machine (accepted: names or uids "
       "separated by commas, or \"any\" alone)");
}

}  // namespace

AllowedUsers allowed_users_from_env() {
  AllowedUsers a;
  const char* v = env("GANG_STORE_ALLOW_USERS");
  if (v == nullptr) return a;
  const std::string text = v;
  if (text == "any" || text == "*") {
    a.any = true;
    return a;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string word = text.substr(start, comma - start);
    while (!word.empty() && word.front() == ' ') word.erase(0, 1);
    while (!word.empty() && word.back() == ' ') word.pop_back();
    a.uids.push_back(user_id(word, text));
    start = comma + 1;
  }
  return a;
}

std::string token_from_env() {
  const char* v = env("GANG_STORE_TOKEN");
  if (v == nullptr) return "";
  std::string token = v;
  check_token(token, "GANG_STORE_TOKEN");
  return token;
}

bool same_token(const std::string& a, const std::string& b) {
  return base::equal_in_constant_time(a, b);
}

std::string random_token() {
  try {
    return base::hex(base::random_bytes(16));
  } catch (const Error& e) {
    fail(Status::kSystem, "cannot draw a store token: ", e.what());
  }
}

namespace {
std::mutex log_mu;
std::function<void(const std::string&)>& log_slot() {
  static std::function<void(const std::string&)> log;
  return log;
}
}  // namespace

void set_server_log(std::function<void(const std::string&)> log) {
  std::lock_guard<std::mutex> lock(log_mu);
  log_slot() = std::move(log);
}

std::function<void(const std::string&)> server_log() {
  std::lock_guard<std::mutex> lock(log_mu);
  return log_slot();
}

ServerOptions server_options_from_env() {
  ServerOptions o;
  o.token = token_from_env();
  o.allowed_users = allowed_users_from_env();
  o.limits = limits_from_env();
  o.log = server_log();
  return o;
}

}  // namespace gang::store
