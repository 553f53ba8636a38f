#include "store/torch_store.h"

#include <sys/uio.h>

#include <utility>

#include "base/error.h"
#include "store/store_util.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Deadline;
using detail::quote;
using net::Io;

// PyTorch's QueryType values (an append-only enum up to 2.1).
enum class Query : uint8_t {
  kSet = 0,
  kGet = 2,
  kAdd = 3,
  kCheck = 4,
  kWait = 5,
  kDeleteKey = 8,
};

constexpr uint8_t kCheckReady = 0;
constexpr uint8_t kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0;

void put_u64(Bytes* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_string(Bytes* out, const std::string& s) {
  put_u64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

// A request naming keys: the type byte, then either one key (SET, GET, ADD,
// DELETE_KEY) or a count and the keys (CHECK, WAIT).
Bytes request(Query q, const std::string& wire_key) {
  Bytes out{static_cast<uint8_t>(q)};
  if (q == Query::kCheck || q == Query::kWait) put_u64(&out, 1);
  put_string(&out, wire_key);
  return out;
}

}  // namespace

// One call's use of one connection: taken from the pool when it starts,
// given back only when the whole exchange succeeded.
class TorchStore::Exchange {
 public:
  Exchange(TorchStore& store, const char* op, const std::string& key,
           const Deadline& deadline)
      : store_(store), op_(op), key_(key), deadline_(deadline) {
    std::string error;
    fd_ = store_.pool_.take(deadline_, &error);
    if (!fd_.valid()) {
      fail(Status::kStore, "torch store: cannot reach ", store_.url(),
           " within ", store_.timeout().count(), " ms: ", error);
    }
  }

  void send(const Bytes& head, const Bytes* value = nullptr) {
    // Both only read by sendmsg.
    iovec iov[2] = {
        {const_cast<uint8_t*>(head.data()), head.size()},
        {value ? const_cast<uint8_t*>(value->data()) : nullptr,
         value ? value->size() : 0},
    };
    check(net::send_all(fd_.get(), iov, value ? 2 : 1, deadline_));
  }

  uint8_t recv_u8() {
    uint8_t b = 0;
    check(net::recv_all(fd_.get(), &b, 1, deadline_));
    return b;
  }

  uint64_t recv_u64() {
    uint8_t b[8];
    check(net::recv_all(fd_.get(), b, sizeof b, deadline_));
    return get_u64(b);
  }

  Bytes recv_value() {
    const uint64_t n = recv_u64();
    if (n > kMaxValueBytes) {
      fail_io({Io::kMalformed, str_cat("a value of ", n, " bytes")});
    }
    Bytes value(static_cast<size_t>(n));
    check(net::recv_all(fd_.get(), value.data(), value.size(), deadline_));
    return value;
  }

  // A reply byte outside the protocol.
  [[noreturn]] void unexpected(uint8_t b) {
    fail_io({Io::kMalformed, str_cat("reply byte ", int{b})});
  }

  void finish() { store_.pool_.give_back(std::move(fd_)); }

 private:
  void check(const Io& io) {
    if (io.kind != Io::kOk) fail_io(io);
  }

  [[noreturn]] void fail_io(const Io& io) {
    const std::string op = op_;
    const std::string what =
        key_.empty() ? str_cat("torch store ", op)
                     : str_cat("torch store ", op, ": key ", quote(key_));
    const std::string url = store_.url();
    switch (io.kind) {
      case Io::kTimeout:
        if (op == "get" || op == "wait") {
          detail::fail_missing(op_, key_, store_.timeout());
        }
        fail(Status::kTimeout, what, ": ", url, " did not answer within ",
             store_.timeout().count(), " ms");
      case Io::kClosed:
        fail(Status::kStore, what, ": ", url, " closed the connection",
             op == "add"    ? " (is the value at that key an integer?)"
             : op == "ping" ? " (is it PyTorch's TCPStore, version 2.1 or "
                              "older?)"
                            : "");
      case Io::kFailed:
        fail(Status::kStore, what, ": talking to ", url,
             " failed: ", io.detail);
      case Io::kMalformed:
      case Io::kOk:
        break;
    }
    fail(Status::kStore, what, ": ", url,
         " does not answer as PyTorch's TCPStore (", io.detail, ")");
  }

  TorchStore& store_;
  const char* op_;
  const std::string& key_;
  const Deadline& deadline_;
  UniqueFd fd_;
};

TorchStore::TorchStore(std::string host, int port, Millis timeout)
    : Store(timeout), host_(std::move(host)), port_(port), pool_(host_, port_) {
  // No handshake exists in these versions: a CHECK must come back as one
  // byte, 0 or 1, which nothing but a TCPStore sends.
  const Deadline deadline(timeout);
  const std::string none;
  try {
    Exchange x(*this, "ping", none, deadline);
    x.send(request(Query::kCheck, kKeyPrefix));
    const uint8_t b = x.recv_u8();
    if (b != kCheckReady && b != kCheckNotReady) x.unexpected(b);
    x.finish();
  } catch (const Error& e) {
    // Something accepted the connection and kept quiet: not a TCPStore.
    if (e.status() != Status::kTimeout) throw;
    fail(Status::kStore, "torch store: ", url(), " does not answer as ",
         "PyTorch's TCPStore: ", e.what());
  }
}

std::string TorchStore::url() const {
  return "torch://" + base::host_port(host_, port_);
}

void TorchStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  const Deadline deadline(timeout());
  Exchange x(*this, "set", key, deadline);
  // SET has no reply. The CHECK behind it on the same connection is served
  // after it, so its answer means the value is stored: a later call on any
  // connection sees it, and a server that dropped the SET is caught here.
  Bytes head{static_cast<uint8_t>(Query::kSet)};
  put_string(&head, kKeyPrefix + key);
  put_u64(&head, value.size());
  x.send(head, &value);
  x.send(request(Query::kCheck, kKeyPrefix + key));
  const uint8_t b = x.recv_u8();
  // NOT_READY only if another client deleted the key in between.
  if (b != kCheckReady && b != kCheckNotReady) x.unexpected(b);
  x.finish();
}

Bytes TorchStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  const Deadline deadline(timeout);
  Exchange x(*this, "get", key, deadline);
  // GET of a missing key makes the server drop the connection: wait first,
  // and only then send the GET (the server reads it only after the wait).
  x.send(request(Query::kWait, kKeyPrefix + key));
  const uint8_t b = x.recv_u8();
  if (b != kStopWaiting) x.unexpected(b);
  x.send(request(Query::kGet, kKeyPrefix + key));
  Bytes value = x.recv_value();
  x.finish();
  return value;
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  const Deadline deadline(timeout());
  Exchange x(*this, "add", key, deadline);
  Bytes head = request(Query::kAdd, kKeyPrefix + key);
  put_u64(&head, static_cast<uint64_t>(delta));
  x.send(head);
  const auto sum = static_cast<int64_t>(x.recv_u64());
  x.finish();
  return sum;
}

void TorchStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  // One key per WAIT, so a timeout names the key that never came.
  for (const auto& key : keys) {
    Exchange x(*this, "wait", key, deadline);
    x.send(request(Query::kWait, kKeyPrefix + key));
    const uint8_t b = x.recv_u8();
    if (b != kStopWaiting) x.unexpected(b);
    x.finish();
  }
}

void TorchStore::remove(const std::string& key) {
  check_key(key);
  const Deadline deadline(timeout());
  Exchange x(*this, "remove", key, deadline);
  x.send(request(Query::kDeleteKey, kKeyPrefix + key));
  x.recv_u64();  // how many were deleted: 0 for a missing key, not an error
  x.finish();
}

bool TorchStore::check(const std::string& key) {
  check_key(key);
  const Deadline deadline(timeout());
  Exchange x(*this, "check", key, deadline);
  x.send(request(Query::kCheck, kKeyPrefix + key));
  const uint8_t b = x.recv_u8();
  if (b != kCheckReady && b != kCheckNotReady) x.unexpected(b);
  x.finish();
  return b == kCheckReady;
}

}  // namespace gang::store
