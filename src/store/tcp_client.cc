#include "store/tcp_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "core/error.h"
#include "store/store_util.h"

namespace gang::store {

namespace {

using detail::Deadline;
using detail::errno_text;
using detail::quote;
using tcp::Op;
using tcp::Reply;

// Idle connections kept beyond this are closed; more only help while that
// many threads call at once.
constexpr size_t kMaxIdle = 4;

// The outcome of one exchange step, turned into an Error by the caller, who
// knows which request it was.
struct Io {
  enum Kind { kOk, kTimeout, kClosed, kFailed, kMalformed } kind = kOk;
  std::string detail;
};

Io failed(int err) { return {Io::kFailed, errno_text(err)}; }

// Waits for fd to become ready for `events`; false at the deadline.
Io wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, deadline.poll_ms());
    if (n > 0) return {};
    if (n == 0) return {Io::kTimeout, ""};
    if (errno != EINTR) return failed(errno);
  }
}

Io send_all(int fd, iovec* iov, int count, const Deadline& deadline) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        const Io io = wait_ready(fd, POLLOUT, deadline);
        if (io.kind != Io::kOk) return io;
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET) return {Io::kClosed, ""};
      return failed(errno);
    }
    auto sent = static_cast<size_t>(n);
    while (count > 0 && sent >= iov->iov_len) {
      sent -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + sent;
      iov->iov_len -= sent;
    }
  }
  return {};
}

Io recv_all(int fd, uint8_t* data, size_t n, const Deadline& deadline) {
  while (n > 0) {
    const ssize_t got = ::recv(fd, data, n, 0);
    if (got > 0) {
      data += got;
      n -= static_cast<size_t>(got);
      continue;
    }
    if (got == 0) return {Io::kClosed, ""};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const Io io = wait_ready(fd, POLLIN, deadline);
      if (io.kind != Io::kOk) return io;
      continue;
    }
    if (errno == ECONNRESET) return {Io::kClosed, ""};
    return failed(errno);
  }
  return {};
}

// One attempt at each address of host:port; on failure says why in *error.
UniqueFd connect_once(const std::string& host, int port,
                      const Deadline& deadline, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    *error = rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc);
    return UniqueFd();
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(
      found, &::freeaddrinfo);
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family,
                         ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         ai->ai_protocol));
    if (!fd.valid()) {
      *error = errno_text(errno);
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        const Io io = wait_ready(fd.get(), POLLOUT, deadline);
        if (io.kind == Io::kTimeout) {
          *error = "connection attempt timed out";
          continue;
        }
        socklen_t len = sizeof err;
        if (io.kind != Io::kOk ||
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          err = errno;
        }
      }
    }
    if (err != 0) {
      *error = errno_text(err);
      continue;
    }
    // Requests are small and each waits for its reply.
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return UniqueFd();
}

}  // namespace

TcpStore::TcpStore(std::string host, int port, Millis timeout,
                   std::unique_ptr<TcpStoreServer> server)
    : Store(timeout),
      server_(std::move(server)),
      host_(std::move(host)),
      // The server listens on every interface, and loopback is the one
      // address certain to reach it from its own host.
      dial_host_(server_ ? "127.0.0.1" : host_),
      port_(port) {
  // Fails now, naming the url, when no gang store answers there.
  call(Op::kPing, "", nullptr, 0, Deadline(timeout));
}

TcpStore::~TcpStore() = default;

std::string TcpStore::url() const {
  const bool v6 = host_.find(':') != std::string::npos;
  return str_cat("tcp://", v6 ? "[" : "", host_, v6 ? "]" : "", ":", port_);
}

UniqueFd TcpStore::take_connection(const Deadline& deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      UniqueFd fd = std::move(idle_.back());
      idle_.pop_back();
      return fd;
    }
  }
  Millis backoff(10);
  std::string error;
  for (;;) {
    UniqueFd fd = connect_once(dial_host_, port_, deadline, &error);
    if (fd.valid()) return fd;
    if (deadline.expired()) {
      fail(Status::kStore, "store: cannot reach ", url(), " within ",
           timeout().count(), " ms: ", error);
    }
    std::this_thread::sleep_for(
        std::min<detail::Clock::duration>(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, Millis(1000));
  }
}

void TcpStore::return_connection(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
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
  Io io = send_all(fd.get(), iov, 3, deadline);

  Answer answer;
  if (io.kind == Io::kOk) {
    uint8_t reply[tcp::kReplyHeaderBytes];
    io = recv_all(fd.get(), reply, sizeof reply, deadline);
    tcp::ReplyHeader rh;
    if (io.kind == Io::kOk) {
      if (const char* why = tcp::decode_reply(op, reply, &rh)) {
        io = {Io::kMalformed, why};
      }
    }
    if (io.kind == Io::kOk) {
      answer.status = rh.status;
      answer.value.resize(rh.value_len);
      io = recv_all(fd.get(), answer.value.data(), answer.value.size(),
                    deadline);
    }
  }

  const std::string what =
      key.empty() ? str_cat("store ", tcp::op_name(op))
                  : str_cat("store ", tcp::op_name(op), ": key ", quote(key));
  switch (io.kind) {
    case Io::kOk:
      return_connection(std::move(fd));
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

Bytes TcpStore::get(const std::string& key) {
  check_key(key);
  return call(Op::kGet, key, nullptr, 0, Deadline(timeout())).value;
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

void TcpStore::wait(const std::vector<std::string>& keys) {
  for (const auto& key : keys) check_key(key);
  const Deadline deadline(timeout());
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
