#include "store/tcp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "store/store_util.h"
#include "store/tcp_protocol.h"
#include "base/unique_fd.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Clock;
using detail::errno_text;
using tcp::Op;
using tcp::Reply;

// A connection whose client does not read its replies stops being read once
// this much output is queued, so it cannot grow the server without bound.
constexpr size_t kMaxQueuedOutput = size_t{4} << 20;
// Bytes read from one connection per wake-up, so one client streaming a
// large value does not starve the others.
constexpr size_t kReadBudget = size_t{4} << 20;
// Buffers this large are freed when they empty rather than kept.
constexpr size_t kKeepCapacity = size_t{1} << 20;
// How long to stop accepting when out of descriptors or memory, instead of
// spinning on a listener that stays readable.
constexpr Millis kAcceptPause(100);

// Binds all interfaces: IPv6 dual-stack where the host has IPv6, else IPv4.
UniqueFd listen_on(int port, int* bound_port) {
  int err = EAFNOSUPPORT;
  for (const int family : {AF_INET6, AF_INET}) {
    UniqueFd fd(
        ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      err = errno;
      continue;
    }
    // Lets a restarted server reuse a port whose old connections linger in
    // TIME_WAIT; on Linux it still refuses a port another socket listens on.
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      const int zero = 0;
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_any;
      a6->sin6_port = htons(static_cast<uint16_t>(port));
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_ANY);
      a4->sin_port = htons(static_cast<uint16_t>(port));
      len = sizeof *a4;
    }
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
      err = errno;
      // The port itself is the problem: IPv4 would fail the same way.
      if (err == EADDRINUSE || err == EACCES) break;
      continue;
    }
    len = sizeof addr;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) !=
        0) {
      err = errno;
      break;
    }
    *bound_port = ntohs(family == AF_INET6
                            ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                            : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    return fd;
  }
  const std::string why =
      str_cat("store server: cannot bind port ", port, ": ", errno_text(err));
  if (err == EADDRINUSE) throw PortInUse(Status::kSystem, why);
  throw Error(Status::kSystem, why);
}

struct Connection {
  explicit Connection(UniqueFd f) : fd(std::move(f)) {}

  size_t queued() const { return out.size() - out_pos; }

  UniqueFd fd;
  Bytes in;  // read, not yet handled from in_pos on
  size_t in_pos = 0;
  Bytes out;  // replies not yet sent from out_pos on
  size_t out_pos = 0;
  // A GET or WAIT waiting for its key; the connection's later requests wait
  // behind it, so replies stay in order.
  bool parked = false;
  Op parked_op = Op::kGet;
  std::string parked_key;
};

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(UniqueFd listener, UniqueFd wake)
      : listener_(std::move(listener)), wake_(std::move(wake)) {}

  void run();
  // Called from another thread.
  void stop();

 private:
  void accept_all();
  void service(uint64_t id, short revents);
  // These return false when the connection must be closed.
  bool read_and_handle(uint64_t id, Connection& c);
  bool handle_frames(uint64_t id, Connection& c);
  bool flush(Connection& c);
  void handle(uint64_t id, Connection& c, Op op, std::string key,
              const uint8_t* value, size_t n);
  void reply(Connection& c, Reply status, const uint8_t* data = nullptr,
             size_t n = 0);
  void park(uint64_t id, Connection& c, Op op, std::string key);
  void wake_waiters(const std::string& key);
  void drain_ready();
  void close(uint64_t id);

  UniqueFd listener_;
  UniqueFd wake_;
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  std::unordered_map<std::string, Bytes> data_;
  // Connections parked on each key. Entries of connections that have since
  // gone are skipped when the key arrives.
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  // Connections just unparked, whose buffered requests still need handling.
  std::vector<uint64_t> ready_;
  Clock::time_point accept_resume_{};
  std::array<uint8_t, 64 * 1024> chunk_{};
};

void TcpStoreServer::Loop::stop() {
  stopping_.store(true);
  const uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow, and then
  // the loop is already due to wake.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void TcpStoreServer::Loop::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  while (!stopping_.load()) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    const auto now = Clock::now();
    const bool accepting = now >= accept_resume_;
    if (accepting) fds.push_back({listener_.get(), POLLIN, 0});
    for (const auto& [id, c] : conns_) {
      // A parked connection is not read (its next requests must wait), but
      // its client hanging up must still free it.
      const bool reading = !c->parked && c->queued() < kMaxQueuedOutput;
      short events = reading ? POLLIN : POLLRDHUP;
      if (c->queued() > 0) events |= POLLOUT;
      fds.push_back({c->fd.get(), events, 0});
      ids.push_back(id);
    }
    int timeout = -1;
    if (!accepting) {
      timeout = static_cast<int>(
          std::chrono::ceil<Millis>(accept_resume_ - now).count());
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      // EINTR, or ENOMEM that may pass: try again shortly.
      if (errno != EINTR) std::this_thread::sleep_for(Millis(10));
      continue;
    }
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_.get(), &count, sizeof count);
      if (stopping_.load()) break;
    }
    const size_t first = accepting ? 2 : 1;
    if (accepting && fds[1].revents != 0) accept_all();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (fds[first + i].revents != 0) service(ids[i], fds[first + i].revents);
    }
    drain_ready();
  }
}

void TcpStoreServer::Loop::accept_all() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        accept_resume_ = Clock::now() + kAcceptPause;
      }
      return;
    }
    // Replies are small and a client waits for each one.
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns_.emplace(next_id_++, std::make_unique<Connection>(std::move(fd)));
  }
}

void TcpStoreServer::Loop::service(uint64_t id, short revents) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  bool keep = true;
  // A bad request or a failed allocation (a huge value) closes this
  // connection only; nothing may end the server's thread.
  try {
    if (revents & (POLLERR | POLLNVAL)) {
      keep = false;
    } else {
      if (revents & POLLOUT) keep = flush(c);
      if (keep) {
        if ((revents & (POLLIN | POLLHUP)) && !c.parked) {
          keep = read_and_handle(id, c);  // sees EOF itself
        } else if (revents & (POLLRDHUP | POLLHUP)) {
          keep = false;
        }
      }
    }
  } catch (const std::exception&) {
    keep = false;
  }
  if (!keep) close(id);
}

bool TcpStoreServer::Loop::read_and_handle(uint64_t id, Connection& c) {
  size_t budget = kReadBudget;
  while (budget > 0 && !c.parked && c.queued() < kMaxQueuedOutput) {
    const ssize_t n = ::recv(c.fd.get(), chunk_.data(), chunk_.size(), 0);
    if (n > 0) {
      c.in.insert(c.in.end(), chunk_.begin(), chunk_.begin() + n);
      budget -= std::min(budget, static_cast<size_t>(n));
      if (!handle_frames(id, c)) return false;
      continue;
    }
    if (n == 0) return false;  // the client hung up
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  return flush(c);
}

bool TcpStoreServer::Loop::handle_frames(uint64_t id, Connection& c) {
  while (!c.parked) {
    const size_t avail = c.in.size() - c.in_pos;
    if (avail < tcp::kRequestHeaderBytes) break;
    const uint8_t* frame = c.in.data() + c.in_pos;
    tcp::RequestHeader h;
    // Checked as soon as the header is in, before any of a claimed 1 GiB
    // payload is buffered.
    if (tcp::decode_request(frame, &h) != nullptr) {
      flush(c);  // best effort: the requests before it are still answered
      return false;
    }
    const size_t total = tcp::kRequestHeaderBytes + h.key_len + h.value_len;
    if (avail < total) break;
    const uint8_t* key = frame + tcp::kRequestHeaderBytes;
    handle(id, c, h.op,
           std::string(reinterpret_cast<const char*>(key), h.key_len),
           key + h.key_len, h.value_len);
    c.in_pos += total;
  }
  if (c.in_pos == c.in.size()) {
    if (c.in.capacity() > kKeepCapacity) {
      Bytes().swap(c.in);
    } else {
      c.in.clear();
    }
    c.in_pos = 0;
  } else if (c.in_pos > 0 && c.in_pos >= c.in.size() / 2) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
  return true;
}

void TcpStoreServer::Loop::handle(uint64_t id, Connection& c, Op op,
                                  std::string key, const uint8_t* value,
                                  size_t n) {
  switch (op) {
    case Op::kSet:
      data_[key] = Bytes(value, value + n);
      reply(c, Reply::kOk);
      wake_waiters(key);
      return;
    case Op::kGet:
    case Op::kWait: {
      const auto it = data_.find(key);
      if (it == data_.end()) {
        park(id, c, op, std::move(key));
      } else if (op == Op::kGet) {
        reply(c, Reply::kOk, it->second.data(), it->second.size());
      } else {
        reply(c, Reply::kOk);
      }
      return;
    }
    case Op::kAdd: {
      const auto delta = static_cast<int64_t>(tcp::get_u64(value));
      const auto it = data_.find(key);
      int64_t sum = 0;
      try {
        sum = detail::add_decimal(
            key, it == data_.end() ? nullptr : &it->second, delta);
      } catch (const Error& e) {
        const std::string message = e.what();
        reply(c, Reply::kBadAdd,
              reinterpret_cast<const uint8_t*>(message.data()),
              std::min(message.size(), tcp::kMaxMessageBytes));
        return;
      }
      data_[key] = detail::decimal_bytes(sum);
      uint8_t out[8];
      tcp::put_u64(out, static_cast<uint64_t>(sum));
      reply(c, Reply::kOk, out, sizeof out);
      wake_waiters(key);
      return;
    }
    case Op::kDelete:
      data_.erase(key);
      reply(c, Reply::kOk);
      return;
    case Op::kCheck:
      reply(c, data_.count(key) != 0 ? Reply::kOk : Reply::kMissing);
      return;
    case Op::kPing:
      reply(c, Reply::kOk);
      return;
  }
}

void TcpStoreServer::Loop::reply(Connection& c, Reply status,
                                 const uint8_t* data, size_t n) {
  tcp::ReplyHeader h;
  h.status = status;
  h.value_len = n;
  uint8_t header[tcp::kReplyHeaderBytes];
  tcp::encode_reply(h, header);
  c.out.insert(c.out.end(), header, header + sizeof header);
  if (n > 0) c.out.insert(c.out.end(), data, data + n);
}

void TcpStoreServer::Loop::park(uint64_t id, Connection& c, Op op,
                                std::string key) {
  waiters_[key].push_back(id);
  c.parked = true;
  c.parked_op = op;
  c.parked_key = std::move(key);
}

void TcpStoreServer::Loop::wake_waiters(const std::string& key) {
  const auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  const Bytes& value = data_.at(key);
  for (const uint64_t id : ids) {
    const auto conn = conns_.find(id);
    if (conn == conns_.end()) continue;
    Connection& c = *conn->second;
    if (!c.parked || c.parked_key != key) continue;
    c.parked = false;
    c.parked_key.clear();
    if (c.parked_op == Op::kGet) {
      reply(c, Reply::kOk, value.data(), value.size());
    } else {
      reply(c, Reply::kOk);
    }
    // Handled after the current request, not inside it, so a chain of
    // wake-ups never nests.
    ready_.push_back(id);
  }
}

void TcpStoreServer::Loop::drain_ready() {
  while (!ready_.empty()) {
    const std::vector<uint64_t> ids = std::move(ready_);
    ready_.clear();
    for (const uint64_t id : ids) {
      const auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      bool keep = false;
      try {
        keep = handle_frames(id, *it->second) && flush(*it->second);
      } catch (const std::exception&) {
        keep = false;
      }
      if (!keep) close(id);
    }
  }
}

bool TcpStoreServer::Loop::flush(Connection& c) {
  while (c.queued() > 0) {
    const ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_pos, c.queued(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  if (c.out.capacity() > kKeepCapacity) {
    Bytes().swap(c.out);
  } else {
    c.out.clear();
  }
  c.out_pos = 0;
  return true;
}

void TcpStoreServer::Loop::close(uint64_t id) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  const Connection& c = *it->second;
  if (c.parked) {
    // Clients that time out and retry would otherwise pile up stale ids
    // under a key that never comes.
    const auto w = waiters_.find(c.parked_key);
    if (w != waiters_.end()) {
      auto& ids = w->second;
      ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
      if (ids.empty()) waiters_.erase(w);
    }
  }
  conns_.erase(it);
}

TcpStoreServer::TcpStoreServer(int port) {
  if (port < 0 || port > 65535) {
    fail(Status::kInvalidArgument, "store server: port ", port,
         " is out of range");
  }
  UniqueFd listener = listen_on(port, &port_);
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    fail(Status::kSystem,
         "store server: cannot create an eventfd: ", errno_text(errno));
  }
  loop_ = std::make_unique<Loop>(std::move(listener), std::move(wake));
  try {
    thread_ = std::thread([loop = loop_.get()] { loop->run(); });
  } catch (const std::system_error& e) {
    fail(Status::kSystem, "store server: cannot start its thread: ", e.what());
  }
}

TcpStoreServer::~TcpStoreServer() {
  loop_->stop();
  thread_.join();
}

}  // namespace gang::store
