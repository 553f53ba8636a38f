#include "store/tcp_client.h"

#include <sys/uio.h>

#include <utility>

#include "base/error.h"
#include "store/store_util.h"

namespace gang::store {

using base::UniqueFd;

using detail::Deadline;
using detail::quote;
using net::Io;
using tcp::Op;
using tcp::Reply;

TcpStore::TcpStore(std::string host, int port, Millis timeout,
                   std::unique_ptr<TcpStoreServer> server)
    : Store(timeout),
      server_(std::move(server)),
      host_(std::move(host)),
      // The server listens on every interface, and loopback is the one
      // address certain to reach it from its own host.
      dial_host_(server_ ? "127.0.0.1" : host_),
      port_(port),
      pool_(dial_host_, port_) {
  // Fails now, naming the url, when no gang store answers there.
  call(Op::kPing, "", nullptr, 0, Deadline(timeout));
}

TcpStore::~TcpStore() = default;

std::string TcpStore::url() const {
  return "tcp://" + base::host_port(host_, port_);
}

UniqueFd TcpStore::take_connection(const Deadline& deadline) {
  std::string error;
  UniqueFd fd = pool_.take(deadline, &error);
  if (!fd.valid()) {
    fail(Status::kStore, "store: cannot reach ", url(), " within ",
         timeout().count(), " ms: ", error);
  }
  return fd;
}

// A connection that fails or times out mid-exchange is dropped rather than
// returned: a late reply on it would answer the next request.
TcpStore::Answer TcpStore::call(Op op, const std::string& key,
                                const uint8_t* value, size_t n,
                                const Deadline& deadline) {
  UniqueFd fd = take_connection(deadline);

  tcp::RequestHeader h;
  h.op = op;
  h.key_len = static_cast<uint32_t>(key.size());
  h.value_len = n;
  uint8_t header[tcp::kRequestHeaderBytes];
  tcp::encode_request(h, header);
  // iovec is not const-correct; sendmsg only reads these.
  iovec iov[3] = {
      {header, sizeof header},
      {const_cast<char*>(key.data()), key.size()},
      {const_cast<uint8_t*>(value), n},
  };
  Io io = net::send_all(fd.get(), iov, 3, deadline);

  Answer answer;
  if (io.kind == Io::kOk) {
    uint8_t reply[tcp::kReplyHeaderBytes];
    io = net::recv_all(fd.get(), reply, sizeof reply, deadline);
    tcp::ReplyHeader rh;
    if (io.kind == Io::kOk) {
      if (const char* why = tcp::decode_reply(op, reply, &rh)) {
        io = {Io::kMalformed, why};
      }
    }
    if (io.kind == Io::kOk) {
      answer.status = rh.status;
      answer.value.resize(rh.value_len);
      io = net::recv_all(fd.get(), answer.value.data(), answer.value.size(),
                         deadline);
    }
  }

  const std::string what =
      key.empty() ? str_cat("store ", tcp::op_name(op))
                  : str_cat("store ", tcp::op_name(op), ": key ", quote(key));
  switch (io.kind) {
    case Io::kOk:
      pool_.give_back(std::move(fd));
      return answer;
    case Io::kTimeout:
      if (op == Op::kGet || op == Op::kWait) {
        detail::fail_missing(tcp::op_name(op), key, timeout());
      }
      fail(Status::kTimeout, what, ": ", url(), " did not answer within ",
           timeout().count(), " ms");
    case Io::kClosed:
      fail(Status::kStore, what, ": ", url(), " closed the connection",
           op == Op::kPing ? " (is it a gang store server of this version?)"
                           : "");
    case Io::kFailed:
      fail(Status::kStore, what, ": talking to ", url(),
           " failed: ", io.detail);
    case Io::kMalformed:
      fail(Status::kStore, what, ": ", url(), " answered with a malformed ",
           "reply (", io.detail, ")");
  }
  fail(Status::kInternal, what, ": unknown I/O outcome");
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  call(Op::kSet, key, value.data(), value.size(), Deadline(timeout()));
}

Bytes TcpStore::get(const std::string& key, Millis timeout) {
  check_key(key);
  return call(Op::kGet, key, nullptr, 0, Deadline(timeout)).value;
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  check_key(key);
  uint8_t payload[8];
  tcp::put_u64(payload, static_cast<uint64_t>(delta));
  const Answer answer =
      call(Op::kAdd, key, payload, sizeof payload, Deadline(timeout()));
  if (answer.status == Reply::kBadAdd) {
    // The server's own message, which names the key.
    fail(Status::kInvalidArgument,
         std::string(answer.value.begin(), answer.value.end()));
  }
  return static_cast<int64_t>(tcp::get_u64(answer.value.data()));
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout);
  for (const auto& key : keys) call(Op::kWait, key, nullptr, 0, deadline);
}

void TcpStore::remove(const std::string& key) {
  check_key(key);
  call(Op::kDelete, key, nullptr, 0, Deadline(timeout()));
}

bool TcpStore::check(const std::string& key) {
  check_key(key);
  return call(Op::kCheck, key, nullptr, 0, Deadline(timeout())).status ==
         Reply::kOk;
}

}  // namespace gang::store
