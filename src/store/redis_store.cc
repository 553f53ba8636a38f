#include "store/redis_store.h"

#include <sys/uio.h>

#include <algorithm>
#include <charconv>
#include <thread>
#include <utility>

#include "base/error.h"
#include "store/store_util.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Clock;
using detail::Deadline;
using detail::quote;
using net::Io;

// A status or error line longer than this is not Redis talking.
constexpr size_t kMaxLineBytes = 64 * 1024;
constexpr Millis kFirstPoll(1);
constexpr Millis kMaxPoll(100);

void append_bulk_header(std::string* out, size_t n) {
  *out += '$';
  *out += std::to_string(n);
  *out += "\r\n";
}

bool parse_i64(const std::string& text, int64_t* out) {
  const char* first = text.data();
  const char* last = first + text.size();
  const auto [end, ec] = std::from_chars(first, last, *out);
  return !text.empty() && ec == std::errc() && end == last;
}

}  // namespace

struct RedisStore::Reply {
  char type = 0;  // '+', '-', ':' or '$'
  std::string text;
  int64_t integer = 0;
  bool nil = false;
  Bytes bulk;
};

RedisStore::RedisStore(std::string host, int port, std::string key_prefix,
                       Millis timeout)
    : Store(timeout),
      host_(std::move(host)),
      port_(port),
      prefix_(std::move(key_prefix)),
      pool_(host_, port_) {
  const Deadline deadline(timeout);
  Reply r;
  try {
    r = command("ping", "", {"PING"}, nullptr, deadline);
  } catch (const Error& e) {
    // Something accepted the connection and kept quiet: not Redis.
    if (e.status() != Status::kTimeout) throw;
    fail(Status::kStore, "redis store: ", url(), " does not answer PING (is ",
         "it a Redis server?): ", e.what());
  }
  if (r.type != '+' || r.text != "PONG") {
    fail(Status::kStore, "redis store: ", url(),
         " does not answer PING with PONG (is it a Redis server that needs "
         "no password?): ",
         r.type == '-' ? r.text : "another reply");
  }
}

std::string RedisStore::url() const {
  return str_cat("redis://", base::host_port(host_, port_),
                 prefix_.empty() ? "" : "/", prefix_);
}

RedisStore::Reply RedisStore::command(const char* op, const std::string& key,
                                      const std::vector<std::string>& args,
                                      const Bytes* value,
                                      const Deadline& deadline) {
  const std::string what =
      key.empty() ? str_cat("redis store ", op)
                  : str_cat("redis store ", op, ": key ", quote(key));
  std::string error;
  UniqueFd fd = pool_.take(deadline, &error);
  if (!fd.valid()) {
    fail(Status::kStore, what, ": cannot reach ", url(), " within ",
         timeout().count(), " ms: ", error);
  }

  // Everything but the value goes into one buffer; the value, up to 1 GiB,
  // is sent from the caller's memory.
  std::string head = str_cat("*", args.size() + (value ? 1 : 0), "\r\n");
  for (const auto& a : args) {
    append_bulk_header(&head, a.size());
    head += a;
    head += "\r\n";
  }
  std::string tail;
  if (value) {
    append_bulk_header(&head, value->size());
    tail = "\r\n";
  }
  iovec iov[3] = {
      {head.data(), head.size()},
      {value ? const_cast<uint8_t*>(value->data()) : nullptr,
       value ? value->size() : 0},
      {tail.data(), tail.size()},
  };
  Io io = net::send_all(fd.get(), iov, 3, deadline);

  // Reads one CRLF-terminated line. Byte by byte: lines are a few bytes,
  // and reading no further than the reply keeps the connection clean for
  // the next command without a buffer that outlives the call.
  auto read_line = [&](std::string* line) {
    line->clear();
    while (io.kind == Io::kOk) {
      uint8_t c = 0;
      io = net::recv_all(fd.get(), &c, 1, deadline);
      if (io.kind != Io::kOk) break;
      if (c == '\n' && !line->empty() && line->back() == '\r') {
        line->pop_back();
        return;
      }
      *line += static_cast<char>(c);
      if (line->size() > kMaxLineBytes)
        io = {Io::kMalformed, "a line too long"};
    }
  };

  Reply r;
  std::string line;
  read_line(&line);
  if (io.kind == Io::kOk) {
    r.type = line.empty() ? 0 : line[0];
    const std::string rest = line.empty() ? "" : line.substr(1);
    switch (r.type) {
      case '+':
      case '-':
        r.text = rest;
        break;
      case ':':
        if (!parse_i64(rest, &r.integer))
          io = {Io::kMalformed, "a bad integer"};
        break;
      case '$': {
        int64_t n = 0;
        if (!parse_i64(rest, &n) || n < -1 ||
            n > static_cast<int64_t>(kMaxValueBytes)) {
          io = {Io::kMalformed, "a bad bulk length"};
          break;
        }
        if (n == -1) {
          r.nil = true;
          break;
        }
        r.bulk.resize(static_cast<size_t>(n) + 2);
        io = net::recv_all(fd.get(), r.bulk.data(), r.bulk.size(), deadline);
        if (io.kind == Io::kOk) {
          if (r.bulk[r.bulk.size() - 2] != '\r' || r.bulk.back() != '\n') {
            io = {Io::kMalformed, "a bulk string without CRLF"};
          }
          r.bulk.resize(static_cast<size_t>(n));
        }
        break;
      }
      default:
        io = {Io::kMalformed, "an unknown reply type"};
    }
  }

  const std::string opname = op;
  switch (io.kind) {
    case Io::kOk:
      pool_.give_back(std::move(fd));
      return r;
    case Io::kTimeout:
      if (opname == "get" || opname == "wait") {
        detail::fail_missing(op, key, timeout());
      }
      fail(Status::kTimeout, what, ": ", url(), " did not answer within ",
           timeout().count(), " ms");
    case Io::kClosed:
      fail(Status::kStore, what, ": ", url(), " closed the connection");
    case Io::kFailed:
      fail(Status::kStore, what, ": talking to ", url(),
           " failed: ", io.detail);
    case Io::kMalformed:
      break;
  }
  fail(Status::kStore, what, ": ", url(),
       " does not answer as a Redis server (", io.detail, ")");
}

namespace {

[[noreturn]] void fail_reply(const std::string& what, const std::string& url,
                             const std::string& text) {
  fail(Status::kStore, what, ": ", url, " answered an error: ", text);
}

}  // namespace

void RedisStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  const Reply r =
      command("set", key, {"SET", prefix_ + key}, &value, Deadline(timeout()));
  if (r.type != '+') {
    fail_reply(str_cat("redis store set: key ", quote(key)), url(),
               r.type == '-' ? r.text : "not OK");
  }
}

Bytes RedisStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  const Deadline deadline(timeout);
  Millis pause = kFirstPoll;
  for (;;) {
    Reply r = command("get", key, {"GET", prefix_ + key}, nullptr, deadline);
    if (r.type != '$') {
      fail_reply(str_cat("redis store get: key ", quote(key)), url(),
                 r.type == '-' ? r.text : "not a bulk string");
    }
    if (!r.nil) return std::move(r.bulk);
    if (deadline.expired()) detail::fail_missing("get", key, timeout);
    std::this_thread::sleep_for(
        std::min<Clock::duration>(pause, deadline.remaining()));
    pause = std::min(pause * 2, kMaxPoll);
  }
}

int64_t RedisStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  const Reply r =
      command("add", key, {"INCRBY", prefix_ + key, std::to_string(delta)},
              nullptr, Deadline(timeout()));
  if (r.type == '-') {
    // "ERR value is not an integer or out of range", "ERR increment or
    // decrement would overflow": the caller's mistake, as with other stores.
    fail(Status::kInvalidArgument, "store add: the value at key ", quote(key),
         " is not a decimal integer, or adding ", delta,
         " overflows (redis: ", r.text, ")");
  }
  if (r.type != ':') {
    fail_reply(str_cat("redis store add: key ", quote(key)), url(),
               "not an integer");
  }
  return r.integer;
}

bool RedisStore::exists(const std::string& key, const Deadline& deadline,
                        const char* op) {
  const Reply r =
      command(op, key, {"EXISTS", prefix_ + key}, nullptr, deadline);
  if (r.type != ':') {
    fail_reply(str_cat("redis store ", op, ": key ", quote(key)), url(),
               r.type == '-' ? r.text : "not an integer");
  }
  return r.integer > 0;
}

void RedisStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  for (const auto& key : keys) {
    Millis pause = kFirstPoll;
    while (!exists(key, deadline, "wait")) {
      if (deadline.expired()) detail::fail_missing("wait", key, timeout);
      std::this_thread::sleep_for(
          std::min<Clock::duration>(pause, deadline.remaining()));
      pause = std::min(pause * 2, kMaxPoll);
    }
  }
}

void RedisStore::remove(const std::string& key) {
  check_key(key);
  const Reply r = command("remove", key, {"DEL", prefix_ + key}, nullptr,
                          Deadline(timeout()));
  if (r.type != ':') {
    fail_reply(str_cat("redis store remove: key ", quote(key)), url(),
               r.type == '-' ? r.text : "not an integer");
  }
}

bool RedisStore::check(const std::string& key) {
  check_key(key);
  return exists(key, Deadline(timeout()), "check");
}

}  // namespace gang::store
