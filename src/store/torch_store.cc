#include "store/torch_store.h"

#include <sys/uio.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "base/error.h"
#include "store/store_util.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Deadline;
using detail::quote;
using net::Io;
using torch_wire::Generation;
using torch_wire::Query;

// How long a wait that timed out gives a current server to confirm its
// CANCEL_WAIT before the connection is dropped instead.
constexpr Millis kCancelGrace{500};

bool check_byte(uint8_t b) {
  return b == torch_wire::kCheckReady || b == torch_wire::kCheckNotReady;
}

// Why a probe got no answer, for the message that lists the versions tried.
std::string why(const Io& io, Millis waited) {
  switch (io.kind) {
    case Io::kTimeout:
      return str_cat("no answer within ", waited.count(), " ms");
    case Io::kClosed:
      return "the server closed the connection";
    case Io::kFailed:
      return io.detail;
    case Io::kMalformed:
      return str_cat("an answer outside the protocol (", io.detail, ")");
    case Io::kOk:
      break;
  }
  return "answered";
}

}  // namespace

// One call's use of one connection: taken from the pool when it starts,
// given back only when the whole exchange succeeded. On a connection new to
// a current server, the first bytes sent are the validation handshake.
class TorchStore::Exchange {
 public:
  enum class Conn {
    kPooled,  // a kept connection or a new one, handshake included
    kRaw,     // new, not from the pool, no handshake (probes)
  };

  Exchange(TorchStore& store, const char* op, const std::string& key,
           const Deadline& deadline, Conn conn = Conn::kPooled)
      : store_(store), op_(op), key_(key), deadline_(deadline) {
    std::string error;
    bool fresh = true;
    fd_ = conn == Conn::kRaw ? connect(&error)
                             : store_.pool_.take(deadline_, &error, &fresh);
    if (!fd_.valid()) {
      fail(Status::kStore, "torch store: cannot reach ", store_.url(),
           " within ", store_.timeout().count(), " ms: ", error);
    }
    handshake_ = conn == Conn::kPooled && fresh &&
                 store_.generation_ == Generation::kCurrent;
  }

  const Deadline& deadline() const { return deadline_; }

  Io send_io(const Bytes& head, const Bytes* value, const Deadline& deadline) {
    static const Bytes hello = torch_wire::validate();
    // All only read by sendmsg.
    iovec iov[3];
    int n = 0;
    if (handshake_) {
      iov[n++] = {const_cast<uint8_t*>(hello.data()), hello.size()};
    }
    iov[n++] = {const_cast<uint8_t*>(head.data()), head.size()};
    if (value && !value->empty()) {
      iov[n++] = {const_cast<uint8_t*>(value->data()), value->size()};
    }
    Io io = net::send_all(fd_.get(), iov, n, deadline);
    if (io.kind == Io::kOk) handshake_ = false;
    return io;
  }

  void send(const Bytes& head, const Bytes* value = nullptr) {
    check(send_io(head, value, deadline_));
  }

  Io recv_io(uint8_t* data, size_t n, const Deadline& deadline) {
    return net::recv_all(fd_.get(), data, n, deadline);
  }

  uint8_t recv_u8() {
    uint8_t b = 0;
    check(recv_io(&b, 1, deadline_));
    return b;
  }

  uint64_t recv_u64() {
    uint8_t b[8];
    check(recv_io(b, sizeof b, deadline_));
    return torch_wire::get_u64(b);
  }

  Bytes recv_value() {
    const uint64_t n = torch_wire::get_u64(recv_bytes(8).data());
    if (n > store_.limits().max_value_bytes) {
      fail_io({Io::kMalformed, str_cat("a value of ", n, " bytes")});
    }
    return recv_bytes(static_cast<size_t>(n));
  }

  // After a WAIT timed out on a current server: cancels it, and keeps the
  // connection if the server confirms promptly. The server may have sent
  // STOP_WAITING before it read the cancel; that byte comes first.
  void cancel_wait() {
    const Deadline grace(kCancelGrace);
    const Bytes cancel =
        torch_wire::request(store_.generation_, Query::kCancelWait);
    if (send_io(cancel, nullptr, grace).kind != Io::kOk) return;
    for (int i = 0; i < 2; ++i) {
      uint8_t b = 0;
      if (recv_io(&b, 1, grace).kind != Io::kOk) return;
      if (b == torch_wire::kWaitCanceled) {
        finish();
        return;
      }
      if (b != torch_wire::kStopWaiting) return;
    }
  }

  // A reply byte outside the protocol.
  [[noreturn]] void unexpected(uint8_t b) {
    fail_io({Io::kMalformed, str_cat("reply byte ", int{b})});
  }

  void finish() {
    if (fd_.valid()) store_.pool_.give_back(std::move(fd_));
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
             op == "add" ? " (is the value at that key an integer?)" : "");
      case Io::kFailed:
        fail(Status::kStore, what, ": talking to ", url,
             " failed: ", io.detail);
      case Io::kMalformed:
      case Io::kOk:
        break;
    }
    fail(Status::kStore, what, ": ", url, " does not answer as PyTorch's ",
         "TCPStore of ", torch_wire::generation_name(store_.generation_), " (",
         io.detail, ")");
  }

 private:
  UniqueFd connect(std::string* error) {
    for (Millis backoff(10);; backoff = std::min(backoff * 2, Millis(1000))) {
      UniqueFd fd =
          net::connect_once(store_.host_, store_.port_, deadline_, error);
      if (fd.valid() || deadline_.expired()) return fd;
      std::this_thread::sleep_for(
          std::min<base::Clock::duration>(backoff, deadline_.remaining()));
    }
  }

  Bytes recv_bytes(size_t n) {
    Bytes b(n);
    check(recv_io(b.data(), b.size(), deadline_));
    return b;
  }

  void check(const Io& io) {
    if (io.kind != Io::kOk) fail_io(io);
  }

  TorchStore& store_;
  const char* op_;
  const std::string& key_;
  const Deadline& deadline_;
  UniqueFd fd_;
  bool handshake_ = false;
};

TorchStore::TorchStore(std::string host, int port, Millis timeout)
    : Store(timeout), host_(std::move(host)), port_(port), pool_(host_, port_) {
  const Deadline deadline(timeout);
  const std::string none;
  // The current generation first: a legacy server refuses its probe at once
  // (see torch_protocol.h), while the libuv server would never answer the
  // legacy probe. A server silent to the first probe is most likely a busy
  // current one, so it gets three quarters of the time left; the rest keeps
  // the legacy probe for a server that answers neither.
  std::string current_why;
  {
    Exchange x(*this, "open", none, deadline, Exchange::Conn::kRaw);
    const Millis share = std::max(Millis(1), deadline.remaining_ms() * 3 / 4);
    const Deadline probe(share);
    uint8_t reply[torch_wire::kCurrentProbeReplyBytes];
    Io io = x.send_io(torch_wire::current_probe(kKeyPrefix), nullptr, probe);
    if (io.kind == Io::kOk) io = x.recv_io(reply, sizeof reply, probe);
    if (io.kind == Io::kOk) {
      const auto keys1 = static_cast<int64_t>(torch_wire::get_u64(reply));
      const auto keys2 = static_cast<int64_t>(torch_wire::get_u64(reply + 8));
      if (keys1 >= 0 && keys2 >= 0 && check_byte(reply[16])) {
        generation_ = Generation::kCurrent;
        x.finish();  // validated: the pool may keep it
        return;
      }
      io = {Io::kMalformed, str_cat("key counts ", keys1, " and ", keys2,
                                    ", check byte ", int{reply[16]})};
    }
    current_why = why(io, share);
  }
  std::string legacy_why;
  {
    generation_ = Generation::kLegacy;
    Exchange x(*this, "open", none, deadline, Exchange::Conn::kRaw);
    uint8_t b = 0;
    Io io = x.send_io(torch_wire::legacy_probe(kKeyPrefix), nullptr, deadline);
    if (io.kind == Io::kOk) io = x.recv_io(&b, 1, deadline);
    if (io.kind == Io::kOk) {
      if (check_byte(b)) {
        x.finish();
        return;
      }
      io = {Io::kMalformed, str_cat("check byte ", int{b})};
    }
    legacy_why = why(io, deadline.remaining_ms());
  }
  fail(Status::kStore, "torch store: ", url(), " does not answer as ",
       "PyTorch's TCPStore; tried the protocol of ",
       torch_wire::generation_name(Generation::kCurrent), ": ", current_why,
       "; and of ", torch_wire::generation_name(Generation::kLegacy), ": ",
       legacy_why);
}

std::string TorchStore::url() const {
  return "torch://" + base::host_port(host_, port_);
}

void TorchStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  if (generation_ == Generation::kCurrent &&
      value.size() > torch_wire::kCurrentMaxValueBytes) {
    fail(Status::kInvalidArgument, "torch store set: key ", quote(key),
         ": a value of ", value.size(), " bytes; PyTorch's TCPStore of ",
         torch_wire::generation_name(generation_), " takes at most ",
         torch_wire::kCurrentMaxValueBytes,
         " (its libuv server drops the connection on more)");
  }
  const std::string wire = kKeyPrefix + key;
  const Deadline deadline(timeout());
  Exchange x(*this, "set", key, deadline);
  // SET has no reply. The CHECK behind it on the same connection is served
  // after it, so its answer means the value is stored: a later call on any
  // connection sees it, and a server that dropped the SET is caught here.
  Bytes head = torch_wire::request(generation_, Query::kSet, wire);
  torch_wire::put_u64(&head, value.size());
  x.send(head, &value);
  x.send(torch_wire::request(generation_, Query::kCheck, wire));
  const uint8_t b = x.recv_u8();
  // NOT_READY only if another client deleted the key in between.
  if (!check_byte(b)) x.unexpected(b);
  x.finish();
}

void TorchStore::wait_one(Exchange& x, const std::string& wire_key) {
  x.send(torch_wire::request(generation_, Query::kWait, wire_key));
  uint8_t b = 0;
  const Io io = x.recv_io(&b, 1, x.deadline());
  if (io.kind == Io::kOk) {
    if (b != torch_wire::kStopWaiting) x.unexpected(b);
    return;
  }
  if (io.kind == Io::kTimeout && generation_ == Generation::kCurrent) {
    x.cancel_wait();
  }
  x.fail_io(io);
}

Bytes TorchStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  const std::string wire = kKeyPrefix + key;
  const Deadline deadline(timeout);
  Exchange x(*this, "get", key, deadline);
  // GET of a missing key makes a legacy server drop the connection and a
  // libuv server answer an empty value: wait first, and only then send the
  // GET (both servers would read a GET sent along with the WAIT at once).
  wait_one(x, wire);
  x.send(torch_wire::request(generation_, Query::kGet, wire));
  Bytes value = x.recv_value();
  x.finish();
  return value;
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  const Deadline deadline(timeout());
  Exchange x(*this, "add", key, deadline);
  Bytes head = torch_wire::request(generation_, Query::kAdd, kKeyPrefix + key);
  torch_wire::put_u64(&head, static_cast<uint64_t>(delta));
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
    wait_one(x, kKeyPrefix + key);
    x.finish();
  }
}

uint8_t TorchStore::delete_type(const std::string& key,
                                const Deadline& deadline) {
  if (generation_ == Generation::kCurrent) return type(Query::kDeleteKey);
  if (const uint8_t t = legacy_delete_.load()) return t;
  std::lock_guard<std::mutex> lock(legacy_delete_mu_);
  if (const uint8_t t = legacy_delete_.load()) return t;
  // A new connection, so that its closing is the server's answer and not
  // an idle connection's end.
  Exchange x(*this, "remove", key, deadline, Exchange::Conn::kRaw);
  x.send(torch_wire::legacy_dialect_probe(kKeyPrefix));
  uint8_t b = 0;
  const Io io = x.recv_io(&b, 1, deadline);
  uint8_t t = 0;
  if (io.kind == Io::kClosed) {
    t = torch_wire::legacy_delete_key(/*with_watch_key=*/true);  // 1.x, 2.0
  } else if (io.kind == Io::kOk && check_byte(b)) {
    t = torch_wire::legacy_delete_key(/*with_watch_key=*/false);  // 2.1
    x.finish();
  } else if (io.kind == Io::kOk) {
    x.unexpected(b);
  } else {
    x.fail_io(io);
  }
  legacy_delete_.store(t);
  return t;
}

void TorchStore::remove(const std::string& key) {
  check_key(key);
  const Deadline deadline(timeout());
  Bytes head{delete_type(key, deadline)};
  torch_wire::put_string(&head, kKeyPrefix + key);
  Exchange x(*this, "remove", key, deadline);
  x.send(head);
  x.recv_u64();  // how many were deleted: 0 for a missing key, not an error
  x.finish();
}

bool TorchStore::check(const std::string& key) {
  check_key(key);
  const Deadline deadline(timeout());
  Exchange x(*this, "check", key, deadline);
  x.send(torch_wire::request(generation_, Query::kCheck, kKeyPrefix + key));
  const uint8_t b = x.recv_u8();
  if (!check_byte(b)) x.unexpected(b);
  x.finish();
  return b == torch_wire::kCheckReady;
}

}  // namespace gang::store
