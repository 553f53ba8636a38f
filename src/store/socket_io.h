// Blocking-with-deadline socket I/O shared by the stores that talk to a
// server over TCP (gang's own server, PyTorch's TCPStore, Redis). Sockets
// are non-blocking and every step polls against one Deadline, so a call that
// connects, sends and receives still ends within one timeout.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "store/store_util.h"
#include "base/unique_fd.h"

namespace gang::store::net {

using base::UniqueFd;

// The outcome of one exchange step, turned into an Error by the caller, who
// knows which request it was.
struct Io {
  enum Kind { kOk, kTimeout, kClosed, kFailed, kMalformed } kind = kOk;
  std::string detail;
};

// Waits for fd to become ready for `events` (POLLIN, POLLOUT).
Io wait_ready(int fd, short events, const detail::Deadline& deadline);

// Sends every byte of the iovecs, which it advances as it goes.
Io send_all(int fd, iovec* iov, int count, const detail::Deadline& deadline);
Io send_all(int fd, const void* data, size_t n,
            const detail::Deadline& deadline);

Io recv_all(int fd, uint8_t* data, size_t n, const detail::Deadline& deadline);

// The waits between attempts to reach a server that is not there yet or
// turned the client away: 10 ms, doubling up to 1 s, each drawn between half
// and all of that so that clients turned away together do not all come
// back together; never past the deadline.
class Backoff {
 public:
  Backoff();
  void wait(const detail::Deadline& deadline);

 private:
  Millis next_{10};
  uint32_t state_;  // 0: not drawn yet
};

// One attempt at each address of host:port; on failure returns an invalid
// fd and says why in *error. The socket is non-blocking, with TCP_NODELAY
// since store requests are small and each waits for its reply.
// *refused (may be null): whether every address refused the connection (no
// server listens there).
UniqueFd connect_once(const std::string& host, int port,
                      const detail::Deadline& deadline, std::string* error,
                      bool* refused = nullptr);

// Idle connections to one server. A call takes one (or opens one, retrying
// until its deadline since the server may start later) for its whole
// exchange, so a request parked on the server never blocks another thread's
// request on the same store. A connection that failed or timed out mid-
// exchange must not be given back: a late reply on it would answer the next
// request.
class ConnectionPool {
 public:
  ConnectionPool(std::string host, int port)
      : host_(std::move(host)), port_(port) {}

  // An open connection, or an invalid fd with *error set at the deadline
  // (connections refused are tried again, with a Backoff).
  // *fresh (may be null) says whether it was opened for this call rather
  // than kept from an earlier one. A kept connection the server has closed
  // meanwhile (its idle timeout) is dropped here, not handed out.
  // A server that answered this pool before and now refuses connections
  // for kGoneAfter is gone (its process ended): an invalid fd at once, with
  // *gone (may be null) set, rather than retries until the deadline.
  UniqueFd take(const detail::Deadline& deadline, std::string* error,
                bool* fresh = nullptr, bool* gone = nullptr);
  static constexpr std::chrono::milliseconds kGoneAfter{2000};
  // Whether the server answered before and refuses connections now.
  bool refusing() const { return answered_.load() && refused_since_.load() != 0; }
  void give_back(UniqueFd fd);

 private:
  // Idle connections kept beyond this are closed; more only help while that
  // many threads call at once.
  static constexpr size_t kMaxIdle = 4;

  std::string host_;
  int port_;
  std::mutex mu_;
  std::vector<UniqueFd> idle_;
  std::atomic<bool> answered_{false};  // a connection ever succeeded
  // Since when (steady clock, ns) every connection was refused; 0: none.
  // Kept across calls, which may each wait only briefly.
  std::atomic<int64_t> refused_since_{0};
};

}  // namespace gang::store::net
