#include "store/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <random>
#include <thread>
#include <utility>

namespace gang::store::net {

using base::UniqueFd;

using detail::Deadline;
using detail::errno_text;

namespace {

Io failed(int err) { return {Io::kFailed, errno_text(err)}; }

}  // namespace

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

Io send_all(int fd, const void* data, size_t n, const Deadline& deadline) {
  // iovec is not const-correct; sendmsg only reads it.
  iovec iov{const_cast<void*>(data), n};
  return send_all(fd, &iov, 1, deadline);
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

// Every store call makes one, and few ever wait: the seed is drawn at the
// first wait.
Backoff::Backoff() : state_(0) {}

void Backoff::wait(const Deadline& deadline) {
  if (state_ == 0) state_ = std::max(1u, static_cast<uint32_t>(std::random_device()()));
  // xorshift32: the spread only needs to differ between processes.
  state_ ^= state_ << 13;
  state_ ^= state_ >> 17;
  state_ ^= state_ << 5;
  const auto half = next_.count() / 2;
  const Millis pause(half + static_cast<int64_t>(state_ % (half + 1)));
  std::this_thread::sleep_for(
      std::min<detail::Clock::duration>(pause, deadline.remaining()));
  next_ = std::min(next_ * 2, Millis(1000));
}

UniqueFd connect_once(const std::string& host, int port,
                      const Deadline& deadline, std::string* error, bool* refused) {
  if (refused) *refused = false;
  bool all_refused = true;
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
      all_refused = all_refused && err == ECONNREFUSED;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  if (refused) *refused = all_refused;
  return UniqueFd();
}

namespace {

// An idle connection has nothing to read: readable means the server closed
// it (EOF or reset), or sent what it should not have.
bool still_open(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  int n;
  do {
    n = ::poll(&p, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n == 0;
}

}  // namespace

UniqueFd ConnectionPool::take(const Deadline& deadline, std::string* error,
                              bool* fresh, bool* gone) {
  if (fresh) *fresh = false;
  if (gone) *gone = false;
  for (;;) {
    UniqueFd fd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) break;
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
    if (still_open(fd.get())) return fd;
  }
  if (fresh) *fresh = true;
  Backoff backoff;
  for (;;) {
    bool refused = false;
    UniqueFd fd = connect_once(host_, port_, deadline, error, &refused);
    if (fd.valid()) {
      answered_.store(true);
      refused_since_.store(0);
      return fd;
    }
    if (refused && answered_.load()) {
      const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              detail::Clock::now().time_since_epoch())
                              .count();
      int64_t since = 0;
      refused_since_.compare_exchange_strong(since, now);
      if (since != 0 && now - since >= std::chrono::nanoseconds(kGoneAfter).count()) {
        if (gone) *gone = true;
        return fd;
      }
    } else if (!refused) {
      refused_since_.store(0);
    }
    if (deadline.expired()) return fd;
    backoff.wait(deadline);
  }
}

void ConnectionPool::give_back(UniqueFd fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
}

}  // namespace gang::store::net
