#include "store/tcp_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/unique_fd.h"
#include "store/readiness.h"
#include "store/server_memory.h"
#include "store/socket_owner.h"
#include "store/store_util.h"
#include "store/tcp_protocol.h"
#include "store/tcp_request.h"

namespace gang::store {

using base::UniqueFd;

namespace {

using detail::Clock;
using detail::errno_text;
using tcp::Op;
using tcp::Reply;

// A connection whose client does not read its replies stops being read once
// this much output is queued, so it cannot grow the server without bound
// (values it is sent are held once, by the store or by the reply).
constexpr size_t kMaxQueuedOutput = size_t{256} << 10;
// Bytes read from one connection per wake-up, so one client streaming a
// large value does not starve the others.
constexpr size_t kReadBudget = size_t{4} << 20;
// How long to stop accepting when out of descriptors or memory, instead of
// spinning on a listener that stays readable.
constexpr Millis kAcceptPause(100);
// A connection refused or denied is read (and what it sends dropped) this
// long after its reply, so the reply reaches a client still sending rather
// than being lost to a reset; then it is closed.
constexpr Millis kLinger(1000);
// Log lines per minute about refused and closed connections; the rest are
// counted and reported as a number.
constexpr int kLogLinesPerMinute = 10;
// Connections turned away before they authenticated (strangers, as a rule)
// are told of by one line for the first of each kind, then by one summary
// line per this period at most, however many there are.
constexpr Millis kStrangerLogPeriod(30000);
// Ready descriptors taken per wait; more wait for the next pass.
constexpr int kEventsPerWait = 512;
// Tags of what the loop waits on: connections by id (from 1), the wake
// eventfd, and the listening sockets by index.
constexpr uint64_t kWakeTag = 0;
constexpr uint64_t kListenerTag = uint64_t{1} << 63;

bool is_wildcard(const std::string& host) {
  return host == "0.0.0.0" || host == "::" || host == "*";
}

std::string numeric_host(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) !=
      0) {
    return "?";
  }
  return host;
}

std::string peer_name(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  char serv[NI_MAXSERV] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host,
                    sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown peer";
  }
  return base::host_port(host, std::atoi(serv));
}

int port_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return -1;
  }
  return ntohs(addr.ss_family == AF_INET6
                   ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

struct Listeners {
  std::vector<UniqueFd> fds;
  std::vector<std::string> addresses;
  int port = 0;
};

[[noreturn]] void fail_bind(const std::string& where, int err) {
  std::string why =
      str_cat("store server: cannot listen on ", where, ": ", errno_text(err));
  if (err == EADDRNOTAVAIL) {
    why +=
        " (not an address of this machine; tcp://0.0.0.0:PORT serves "
        "every interface)";
  }
  if (err == EADDRINUSE) throw PortInUse(Status::kSystem, why);
  throw Error(Status::kSystem, why);
}

// A listening socket on addr, or an invalid fd with *err set.
UniqueFd bind_one(const sockaddr* addr, socklen_t len, bool dual_stack,
                  int* err) {
  UniqueFd fd(
      ::socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *err = errno;
    return fd;
  }
  // Lets a restarted server reuse a port whose old connections linger in
  // TIME_WAIT; on Linux it still refuses a port another socket listens on.
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr->sa_family == AF_INET6) {
    const int v6only = dual_stack ? 0 : 1;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
  }
  if (::bind(fd.get(), addr, len) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
    *err = errno;
    return UniqueFd();
  }
  return fd;
}

// Every interface: IPv6 dual-stack where the host has IPv6, else IPv4.
Listeners listen_everywhere(int port) {
  int err = EAFNOSUPPORT;
  for (const int family : {AF_INET6, AF_INET}) {
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (family == AF_INET6) {
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
    UniqueFd fd = bind_one(reinterpret_cast<sockaddr*>(&addr), len, true, &err);
    if (!fd.valid()) {
      // The port itself is the problem: IPv4 would fail the same way.
      if (err == EADDRINUSE || err == EACCES) break;
      continue;
    }
    Listeners l;
    l.port = port_of(fd.get());
    l.addresses.push_back(family == AF_INET6 ? "::" : "0.0.0.0");
    l.fds.push_back(std::move(fd));
    return l;
  }
  fail_bind(str_cat("every interface, port ", port), err);
}

// Every address host resolves to, on one port.
Listeners listen_on(const std::string& host, int port) {
  if (is_wildcard(host)) return listen_everywhere(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "0", &hints, &found);
  if (rc != 0) {
    fail(Status::kSystem, "store server: cannot resolve \"", host,
         "\": ", rc == EAI_SYSTEM ? errno_text(errno) : ::gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(
      found, &::freeaddrinfo);
  std::vector<sockaddr_storage> addrs;
  std::vector<socklen_t> lens;
  std::vector<std::string> names;
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    const std::string name = numeric_host(ai->ai_addr, ai->ai_addrlen);
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    sockaddr_storage a{};
    std::memcpy(&a, ai->ai_addr, ai->ai_addrlen);
    addrs.push_back(a);
    lens.push_back(static_cast<socklen_t>(ai->ai_addrlen));
    names.push_back(name);
  }
  const std::string where = base::host_port(host, port);
  if (addrs.empty()) fail_bind(where, EADDRNOTAVAIL);
  // With port 0 the first address picks the port and the others follow;
  // should one of them have it taken already, try again with another.
  for (int attempt = 0;; ++attempt) {
    Listeners l;
    l.port = port;
    int err = EADDRNOTAVAIL;
    bool retry = false;
    for (size_t i = 0; i < addrs.size(); ++i) {
      sockaddr_storage a = addrs[i];
      const auto p = htons(static_cast<uint16_t>(l.port));
      if (a.ss_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = p;
      } else {
        reinterpret_cast<sockaddr_in*>(&a)->sin_port = p;
      }
      UniqueFd fd =
          bind_one(reinterpret_cast<sockaddr*>(&a), lens[i], false, &err);
      if (!fd.valid()) {
        // An address this machine lacks (::1 without IPv6): the others
        // still serve.
        if (err == EADDRNOTAVAIL || err == EAFNOSUPPORT) continue;
        if (err == EADDRINUSE && port == 0 && !l.fds.empty() && attempt < 8) {
          retry = true;
          break;
        }
        fail_bind(base::host_port(names[i], l.port), err);
      }
      if (l.port == 0) l.port = port_of(fd.get());
      l.fds.push_back(std::move(fd));
      l.addresses.push_back(names[i]);
    }
    if (retry) continue;
    if (l.fds.empty()) fail_bind(where, err);
    return l;
  }
}

bool is_loopback(const std::string& address) {
  return address == "::1" || address.rfind("127.", 0) == 0 ||
         address.rfind("::ffff:127.", 0) == 0;
}

// The server's view of a stored value: its bytes and their share of the
// budget, given back when the last holder (the store, a reply being sent)
// lets go.
struct Value {
  Buffer bytes;
  Reservation reserved;
};
using ValuePtr = std::shared_ptr<const Value>;

struct Entry {
  ValuePtr value;
  Reservation key_cost;  // the key and kEntryOverheadBytes
};

// A reply: header (and any small payload) in `head`, a stored value behind.
struct OutItem {
  Bytes head;
  Reservation head_cost;
  ValuePtr value;
  size_t sent = 0;

  size_t size() const {
    return head.size() + (value ? value->bytes.size() : 0);
  }
};

struct Connection {
  Connection(uint64_t i, UniqueFd f, std::string who, const Limits& limits,
             Budget* budget, bool need_auth, Clock::time_point now)
      : id(i),
        fd(std::move(f)),
        peer(std::move(who)),
        reader(limits, budget),
        accepted(now),
        last_read(now),
        last_write(now) {
    reader.require_auth(need_auth);
  }

  uint64_t id;
  UniqueFd fd;
  std::string peer;  // "10.0.0.5:41234", for logs
  tcp::RequestReader reader;
  // It showed the token (a server with one), or passed the user check and
  // sent its first request's header (a server without); until then it is
  // one of the server's pending connections.
  bool authenticated = false;
  // The loop pass in which make_room last read it.
  uint64_t swept = 0;
  // The loop pass in which something changed it (Loop::touch), so its
  // events and deadline are looked at again when the pass ends.
  uint64_t touched = 0;
  // The events it is registered for.
  uint32_t events = 0;
  // Its earliest entry in the loop's deadline heap; max() for none.
  Clock::time_point due = Clock::time_point::max();

  std::deque<OutItem> out;
  size_t queued = 0;  // bytes of `out` not yet sent

  // A GET or WAIT waiting for its key; the connection's later requests wait
  // behind it, so replies stay in order.
  bool parked = false;
  Op parked_op = Op::kGet;
  std::string parked_key;

  // Refused or denied: its reply is sent, then what it sends is dropped
  // until it hangs up or kLinger passes.
  bool closing = false;
  bool write_shut = false;

  Clock::time_point accepted;
  Clock::time_point last_read;
  Clock::time_point last_write;
  Clock::time_point closing_since{};
};

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(Listeners listeners, UniqueFd wake, ServerOptions options)
      : listeners_(std::move(listeners.fds)),
        wake_(std::move(wake)),
        options_(std::move(options)),
        budget_(options_.limits.max_total_bytes) {
    bool added = readiness_.add(wake_.get(), kWakeTag, EPOLLIN);
    for (size_t i = 0; i < listeners_.size(); ++i) {
      added = added && readiness_.add(listeners_[i].get(), kListenerTag + i, EPOLLIN);
    }
    if (!added) {
      fail(Status::kSystem, "store server: cannot wait on its sockets: ",
           errno_text(errno));
    }
  }

  void run();
  // Called from another thread.
  void stop();
  ServerStats stats() const;

 private:
  // What befalls connections that never authenticated.
  enum Stranger {
    kOtherUser,    // a process of another user (no token)
    kNoToken,      // no token, or a wrong one
    kOverPending,  // pushed out: too many waiting to authenticate
    kSilent,       // did not authenticate in time
    kFull,         // authenticated past GANG_STORE_MAX_CONNECTIONS
    kStrangerKinds
  };

  void accept_all(int listener);
  // A server without a token: refuses c unless its process belongs to an
  // allowed user (or to another machine).
  void check_user(Connection& c, const sockaddr_storage& addr);
  // Counts c among the authenticated connections, or answers kBusy when
  // there are as many as allowed; false then.
  bool admit(uint64_t id, Connection& c);
  // Before a new connection is taken with the pending quota full: reads
  // the pending connections that have spoken (a crowd of ranks connecting
  // at once must not push each other out), then pushes out the oldest that
  // is still pending.
  void make_room();
  // Starts or stops waiting on the listeners.
  void listen(bool on);
  void service(uint64_t id, uint32_t revents);
  // These return false when the connection must be closed now.
  bool read_and_handle(uint64_t id, Connection& c);
  bool feed(uint64_t id, Connection& c, const uint8_t* data, size_t n);
  bool drop_input(Connection& c);
  bool flush(Connection& c);
  void handle(uint64_t id, Connection& c, tcp::Request r);
  void reply(Connection& c, Reply status, const uint8_t* data = nullptr,
             size_t n = 0, ValuePtr value = nullptr);
  // Answers status + message, then closes the connection (after kLinger).
  void end_with(Connection& c, Reply status, const std::string& message);
  void park(uint64_t id, Connection& c, Op op, std::string key);
  void wake_waiters(const std::string& key);
  void drain_ready();
  // When c is due to be closed for silence; time_point::max() for never.
  Clock::time_point deadline(const Connection& c) const;
  // Notes that c changed: settle() looks at its events and deadline.
  void touch(Connection& c);
  // Registers the events and deadlines of the connections touched.
  void settle();
  // Puts c in the deadline heap at `when`, unless it is there earlier.
  void schedule(Connection& c, Clock::time_point when);
  // Closes the connections whose deadline passed.
  void expire(Clock::time_point now);
  // How long the next wait may last, in ms (-1: no limit).
  int wait_ms(Clock::time_point now) const;
  void close(uint64_t id);
  void log(const std::string& line);
  void flush_log(Clock::time_point now);
  // Logs `line` if it is the first stranger of its kind this period, else
  // only counts it for the period's summary.
  void note(Stranger kind, const std::string& line);
  void flush_strangers(Clock::time_point now);

  std::vector<UniqueFd> listeners_;
  UniqueFd wake_;
  Readiness readiness_;
  bool accepting_ = true;
  ServerOptions options_;
  std::atomic<bool> stopping_{false};
  // Declared before everything drawn from it, so it is destroyed after.
  Budget budget_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  // The connections not yet authenticated, oldest (smallest id) first.
  std::set<uint64_t> pending_;
  uint64_t pass_ = 1;  // loop passes, for Connection::swept
  uid_t own_uid_ = ::geteuid();
  std::string own_user_ = user_name(own_uid_);
  std::unordered_map<std::string, Entry> data_;
  // Connections parked on each key. Entries of connections that have since
  // gone are skipped when the key arrives.
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  // Connections just unparked, whose replies still need sending.
  std::vector<uint64_t> ready_;
  // Connections changed this pass (touch).
  std::vector<uint64_t> touched_;
  // (when, id): a connection is due at its earliest entry; an entry later
  // than the connection's `due` was superseded and is skipped. Deadlines
  // that move later (every request moves the idle one) are not pushed:
  // the entry found due is checked against the connection's deadline then.
  using Due = std::pair<Clock::time_point, uint64_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> dues_;
  Clock::time_point accept_resume_{};
  std::array<uint8_t, 64 * 1024> chunk_{};

  struct Counters {
    std::atomic<uint64_t> requests{0}, accepted{0}, over_connections{0},
        over_pending{0}, denied{0}, other_users{0}, refused{0}, malformed{0},
        timed_out{0};
  } counters_;
  Clock::time_point log_window_{};
  int log_lines_ = 0;
  uint64_t log_suppressed_ = 0;
  Clock::time_point strangers_since_{};
  std::array<uint64_t, kStrangerKinds> strangers_{};
};

void TcpStoreServer::Loop::stop() {
  stopping_.store(true);
  const uint64_t one = 1;
  // An eventfd write only fails when the counter would overflow, and then
  // the loop is already due to wake.
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

ServerStats TcpStoreServer::Loop::stats() const {
  ServerStats s;
  s.requests = counters_.requests.load();
  s.accepted = counters_.accepted.load();
  s.over_connections = counters_.over_connections.load();
  s.over_pending = counters_.over_pending.load();
  s.denied = counters_.denied.load();
  s.other_users = counters_.other_users.load();
  s.refused = counters_.refused.load();
  s.malformed = counters_.malformed.load();
  s.timed_out = counters_.timed_out.load();
  return s;
}

void TcpStoreServer::Loop::log(const std::string& line) {
  if (!options_.log) return;
  const auto now = Clock::now();
  flush_log(now);
  if (log_lines_ >= kLogLinesPerMinute) {
    ++log_suppressed_;
    return;
  }
  ++log_lines_;
  try {
    options_.log(line);
  } catch (...) {
    // A logger that fails must not stop the server.
  }
}

void TcpStoreServer::Loop::flush_log(Clock::time_point now) {
  if (now - log_window_ < std::chrono::minutes(1)) return;
  log_window_ = now;
  log_lines_ = 0;
  if (log_suppressed_ > 0 && options_.log) {
    const uint64_t n = std::exchange(log_suppressed_, 0);
    try {
      options_.log(str_cat(n,
                           " more refused or closed connections in the "
                           "last minute not shown"));
    } catch (...) {
    }
  }
}

void TcpStoreServer::Loop::note(Stranger kind, const std::string& line) {
  const auto now = Clock::now();
  flush_strangers(now);
  if (strangers_[kind]++ > 0 || !options_.log) return;
  try {
    options_.log(line);
  } catch (...) {
  }
}

void TcpStoreServer::Loop::flush_strangers(Clock::time_point now) {
  if (now - strangers_since_ < kStrangerLogPeriod) return;
  const std::array<uint64_t, kStrangerKinds> n = strangers_;
  strangers_ = {};
  strangers_since_ = now;
  uint64_t total = 0;
  uint64_t unsaid = 0;  // beyond the first of each kind, which had a line
  for (const uint64_t k : n) {
    total += k;
    unsaid += k > 0 ? k - 1 : 0;
  }
  if (unsaid == 0 || !options_.log) return;
  std::string parts;
  const auto part = [&parts](uint64_t k, const std::string& what) {
    if (k == 0) return;
    parts += str_cat(parts.empty() ? "" : ", ", k, " ", what);
  };
  const Limits& l = options_.limits;
  part(n[kOtherUser], "of other users");
  part(n[kNoToken], "without the token");
  part(n[kOverPending],
       str_cat("pushed out over the ", l.max_pending_connections,
               " allowed to wait for authentication "
               "(GANG_STORE_MAX_PENDING_CONNECTIONS)"));
  part(n[kSilent],
       str_cat("silent for ",
               std::min(l.auth_timeout, l.request_timeout).count(), " ms"));
  part(n[kFull], str_cat("over the limit of ", l.max_connections,
                         " connections (GANG_STORE_MAX_CONNECTIONS)"));
  try {
    options_.log(str_cat(
        "turned away ", total, " connections before serving them, in the last ",
        std::chrono::duration_cast<std::chrono::seconds>(kStrangerLogPeriod)
            .count(),
        " s or less: ", parts));
  } catch (...) {
  }
}

Clock::time_point TcpStoreServer::Loop::deadline(const Connection& c) const {
  const Limits& l = options_.limits;
  if (c.closing)
    return c.closing_since +
           std::min<Clock::duration>(kLinger, l.request_timeout);
  if (!c.authenticated) {
    return c.accepted + std::min(l.auth_timeout, l.request_timeout);
  }
  if (c.queued > 0) return c.last_write + l.request_timeout;
  if (c.reader.in_request()) return c.last_read + l.request_timeout;
  // Waiting on the server, not the client: the client's own timeout ends
  // it, and TCP keepalive a client that vanished.
  if (c.parked) return Clock::time_point::max();
  return std::max(c.last_read, c.last_write) + l.idle_timeout;
}

namespace {

// What a connection waits for: its requests while it may take more (not
// while parked, so later requests wait their turn, nor while its replies
// pile up unread), its client hanging up when not reading, and room for
// its queued replies.
uint32_t interest(const Connection& c) {
  const bool reading =
      c.closing || (!c.parked && c.queued < kMaxQueuedOutput);
  uint32_t events = reading ? EPOLLIN : EPOLLRDHUP;
  if (c.queued > 0) events |= EPOLLOUT;
  return events;
}

}  // namespace

void TcpStoreServer::Loop::touch(Connection& c) {
  if (c.touched == pass_) return;
  c.touched = pass_;
  touched_.push_back(c.id);
}

void TcpStoreServer::Loop::schedule(Connection& c, Clock::time_point when) {
  if (when >= c.due) return;
  c.due = when;
  dues_.emplace(when, c.id);
}

void TcpStoreServer::Loop::settle() {
  for (const uint64_t id : touched_) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    Connection& c = *it->second;
    const uint32_t want = interest(c);
    if (want != c.events) {
      if (!readiness_.change(c.fd.get(), id, want)) {
        log(str_cat("closed the connection from ", c.peer,
                    ": cannot wait on it: ", errno_text(errno)));
        close(id);
        continue;
      }
      c.events = want;
    }
    schedule(c, deadline(c));
  }
  touched_.clear();
  // Superseded entries wait in the heap until their time; should they
  // outnumber the connections, start over from the connections' own.
  if (dues_.size() > 2 * conns_.size() + 1024) {
    decltype(dues_) fresh;
    for (const auto& [id, c] : conns_) {
      if (c->due != Clock::time_point::max()) fresh.emplace(c->due, id);
    }
    dues_ = std::move(fresh);
  }
}

void TcpStoreServer::Loop::expire(Clock::time_point now) {
  const Limits& l = options_.limits;
  while (!dues_.empty() && dues_.top().first <= now) {
    const auto [when, id] = dues_.top();
    dues_.pop();
    const auto it = conns_.find(id);
    if (it == conns_.end() || it->second->due != when) continue;
    Connection& c = *it->second;
    c.due = Clock::time_point::max();
    const Clock::time_point due = deadline(c);
    if (due > now) {
      schedule(c, due);
      continue;
    }
    if (c.closing) {
      // Its refusal was said; nothing more to tell.
    } else if (!c.authenticated) {
      counters_.timed_out.fetch_add(1);
      note(kSilent,
           str_cat("closed the connection from ", c.peer,
                   ": it did not authenticate within ",
                   std::min(l.auth_timeout, l.request_timeout).count(),
                   " ms (GANG_STORE_AUTH_TIMEOUT_MS)"));
    } else {
      counters_.timed_out.fetch_add(1);
      const char* what = c.queued > 0 ? "did not read its reply"
                         : c.reader.in_request()
                             ? "stopped half-way through a request"
                             : "was idle";
      const Millis after = c.queued > 0 || c.reader.in_request()
                               ? l.request_timeout
                               : l.idle_timeout;
      log(str_cat("closed the connection from ", c.peer, ": it ", what,
                  " for ", after.count(), " ms"));
    }
    close(id);
  }
}

int TcpStoreServer::Loop::wait_ms(Clock::time_point now) const {
  Clock::time_point wake_at =
      accepting_ ? Clock::time_point::max() : accept_resume_;
  for (const uint64_t k : strangers_) {
    // A summary is due: wake for it even if nothing else happens.
    if (k > 1) wake_at = std::min(wake_at, strangers_since_ + kStrangerLogPeriod);
  }
  if (!dues_.empty()) wake_at = std::min(wake_at, dues_.top().first);
  if (wake_at == Clock::time_point::max()) return -1;
  const int64_t ms = std::chrono::ceil<Millis>(wake_at - now).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60000));
}

void TcpStoreServer::Loop::listen(bool on) {
  if (on == accepting_) return;
  accepting_ = on;
  for (size_t i = 0; i < listeners_.size(); ++i) {
    readiness_.change(listeners_[i].get(), kListenerTag + i,
                      on ? uint32_t{EPOLLIN} : uint32_t{0});
  }
}

void TcpStoreServer::Loop::run() {
  std::array<epoll_event, kEventsPerWait> events;
  while (!stopping_.load()) {
    const auto now = Clock::now();
    ++pass_;
    flush_log(now);
    flush_strangers(now);
    if (!accepting_ && now >= accept_resume_) listen(true);
    expire(now);
    const int n = readiness_.wait(events.data(), kEventsPerWait, wait_ms(now));
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) {
        uint64_t count = 0;
        [[maybe_unused]] ssize_t r = ::read(wake_.get(), &count, sizeof count);
        if (stopping_.load()) return;
      } else if (tag >= kListenerTag) {
        if (accepting_) accept_all(listeners_[tag - kListenerTag].get());
      } else {
        service(tag, events[i].events);
      }
    }
    drain_ready();
    settle();
  }
}

void TcpStoreServer::Loop::accept_all(int listener) {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    UniqueFd fd(::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        const int err = errno;
        log(str_cat("stopped accepting connections for ", kAcceptPause.count(),
                    " ms: ", errno_text(err),
                    err == EMFILE
                        ? str_cat(" (this process's limit, RLIMIT_NOFILE; the "
                                  "server holds ",
                                  conns_.size(),
                                  " connections, a few for each rank)")
                        : std::string()));
        accept_resume_ = Clock::now() + kAcceptPause;
        listen(false);
      }
      return;
    }
    counters_.accepted.fetch_add(1);
    // Connections that have not authenticated have a quota of their own;
    // the authenticated ones are counted against GANG_STORE_MAX_CONNECTIONS
    // when they authenticate (admit), so a crowd of silent strangers can
    // never keep the job's ranks out.
    while (pending_.size() >= options_.limits.max_pending_connections) {
      make_room();
    }
    // Replies are small and a client waits for each one.
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A client whose machine vanished (no FIN, no RST) is found within
    // about two minutes, even while parked on a key.
    ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    const int idle_s = 60, interval_s = 10, probes = 6;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL, &interval_s,
                 sizeof interval_s);
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
    const uint64_t id = next_id_++;
    auto conn = std::make_unique<Connection>(
        id, std::move(fd), peer_name(addr, len), options_.limits, &budget_,
        !options_.token.empty(), Clock::now());
    Connection& c = *conn;
    conns_.emplace(id, std::move(conn));
    pending_.insert(id);
    if (options_.token.empty() && !options_.allowed_users.any) {
      check_user(c, addr);
    }
    c.events = interest(c);
    if (!readiness_.add(c.fd.get(), id, c.events)) {
      log(str_cat("closed the connection from ", c.peer,
                  ": cannot wait on it: ", errno_text(errno)));
      close(id);
      continue;
    }
    touch(c);
  }
}

void TcpStoreServer::Loop::check_user(Connection& c,
                                      const sockaddr_storage& addr) {
  const SocketOwner owner = peer_owner(c.fd.get());
  const AllowedUsers& allowed = options_.allowed_users;
  std::string why;  // for the client, and the log
  uid_t uid = 0;
  switch (owner.kind) {
    case SocketOwner::kFound:
      uid = owner.uid;
      if (uid == own_uid_ || std::find(allowed.uids.begin(), allowed.uids.end(),
                                       uid) != allowed.uids.end()) {
        return;
      }
      break;
    case SocketOwner::kNotLocal:
    case SocketOwner::kUnowned:
    case SocketOwner::kUnknown:
      // Another machine cannot be asked; a server that other machines can
      // reach without a token said so when it started. A peer at an
      // address of this host (loopback or not) is on this machine, and one
      // whose user cannot be told is refused: the check fails closed.
      if (!is_this_host(addr)) return;
      why = owner.kind == SocketOwner::kNotLocal
                ? "the kernel knows no socket of this host at its address"
                : owner.why;
      break;
  }
  counters_.other_users.fetch_add(1);
  const char* const how =
      "To share a store between users, give the server and every rank the "
      "same GANG_STORE_TOKEN, or set GANG_STORE_ALLOW_USERS where the "
      "server runs";
  if (why.empty()) {
    note(kOtherUser,
         str_cat("refused the connection from ", c.peer,
                 ": its process runs as uid ", uid, ", not as ", own_user_,
                 " who serves this store without a token (see "
                 "GANG_STORE_TOKEN and GANG_STORE_ALLOW_USERS)"));
    end_with(c, Reply::kDenied,
             str_cat("the store belongs to another user, ", own_user_,
                     ", and this process runs as uid ", uid, ". ", how, " (",
                     uid, ", a name, or any)"));
  } else {
    // A peer whose socket no process holds has closed it already (a rank
    // that gave up on a connection the server had not accepted yet): it is
    // refused all the same, but nobody is there to warn about.
    if (owner.kind != SocketOwner::kUnowned) {
      note(kOtherUser,
           str_cat("refused the connection from ", c.peer,
                   ": cannot tell which user its process runs as (", why, ")"));
    }
    end_with(c, Reply::kDenied,
             str_cat("the store, served by ", own_user_,
                     " without a token, cannot tell which user this process "
                     "runs as (",
                     why, "), so it serves no one but its own user. ", how,
                     " (any)"));
  }
}

bool TcpStoreServer::Loop::admit(uint64_t id, Connection& c) {
  const size_t authenticated = conns_.size() - pending_.size();
  if (authenticated >= options_.limits.max_connections) {
    counters_.over_connections.fetch_add(1);
    const std::string message =
        str_cat("the server has ", authenticated,
                " connections open, its limit (GANG_STORE_MAX_CONNECTIONS)");
    note(kFull,
         str_cat("turned away the connection from ", c.peer, ": ", message));
    end_with(c, Reply::kBusy, message);
    return false;
  }
  c.authenticated = true;
  pending_.erase(id);
  return true;
}

void TcpStoreServer::Loop::make_room() {
  std::vector<uint64_t> unread;
  for (const uint64_t id : pending_) {
    const Connection& c = *conns_.at(id);
    if (!c.closing && c.swept != pass_) unread.push_back(id);
  }
  for (const uint64_t id : unread) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    it->second->swept = pass_;
    touch(*it->second);
    bool keep = false;
    try {
      keep = read_and_handle(id, *it->second);
    } catch (const std::exception&) {
      keep = false;
    }
    if (!keep) close(id);
  }
  if (pending_.size() < options_.limits.max_pending_connections) return;
  const uint64_t id = *pending_.begin();
  Connection& c = *conns_.at(id);
  if (!c.closing) {
    counters_.over_pending.fetch_add(1);
    const std::string message =
        str_cat("more than ", options_.limits.max_pending_connections,
                " connections are waiting to authenticate, the server's limit "
                "(GANG_STORE_MAX_PENDING_CONNECTIONS)");
    note(kOverPending,
         str_cat("closed the connection from ", c.peer,
                 ", the oldest not yet authenticated: ", message));
    // Told to come back, if its socket takes the words now. What it sent is
    // dropped first: closing a socket with unread bytes resets the
    // connection, and the reset could overtake the reply.
    end_with(c, Reply::kBusy, message);
    drop_input(c);
  }
  flush(c);
  close(id);
}

void TcpStoreServer::Loop::service(uint64_t id, uint32_t revents) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  touch(c);
  bool keep = true;
  // A bad request or a failed allocation closes this connection only;
  // nothing may end the server's thread.
  try {
    if (revents & EPOLLERR) {
      keep = false;
    } else {
      if (revents & EPOLLOUT) keep = flush(c);
      if (keep) {
        if ((revents & (EPOLLIN | EPOLLHUP)) && c.closing) {
          keep = drop_input(c);
        } else if ((revents & (EPOLLIN | EPOLLHUP)) && !c.parked) {
          keep = read_and_handle(id, c);  // sees EOF itself
        } else if (revents & (EPOLLRDHUP | EPOLLHUP)) {
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
  while (budget > 0 && !c.parked && !c.closing && c.queued < kMaxQueuedOutput) {
    // Never past the request in progress: a connection that parks or is
    // refused leaves its later bytes in the socket, not in the server.
    const size_t want = std::min(chunk_.size(), c.reader.wanted());
    const ssize_t n = ::recv(c.fd.get(), chunk_.data(), want, 0);
    if (n > 0) {
      c.last_read = Clock::now();
      budget -= std::min(budget, static_cast<size_t>(n));
      if (!feed(id, c, chunk_.data(), static_cast<size_t>(n))) return false;
      // A whole request served: back to the loop, which reports the
      // connection again while more of it waits in the socket (level
      // triggered), instead of a read that most often finds nothing.
      if (!c.reader.in_request()) break;
      continue;
    }
    if (n == 0) return false;  // the client hung up
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  return flush(c);
}

bool TcpStoreServer::Loop::feed(uint64_t id, Connection& c, const uint8_t* data,
                                size_t n) {
  size_t off = 0;
  while (off < n && !c.parked && !c.closing) {
    size_t used = 0;
    const auto r = c.reader.feed(data + off, n - off, &used);
    off += used;
    // Without a token, a connection that passed the user check is counted
    // as authenticated once its first request's header is in: a client
    // says something at once, and a large first value may take a while.
    if (!c.authenticated && options_.token.empty() &&
        (r == tcp::RequestReader::Result::kRequest || c.reader.header_read()) &&
        !admit(id, c)) {
      return true;
    }
    switch (r) {
      case tcp::RequestReader::Result::kNeedMore:
        break;
      case tcp::RequestReader::Result::kRequest:
        handle(id, c, c.reader.take());
        break;
      case tcp::RequestReader::Result::kUnauthenticated:
        counters_.denied.fetch_add(1);
        note(kNoToken, str_cat("refused the connection from ", c.peer,
                               ": no token (", c.reader.why(), ")"));
        end_with(c, Reply::kDenied,
                 "this store requires a token: set GANG_STORE_TOKEN, or "
                 "?token= in the url, to the server's");
        return true;
      case tcp::RequestReader::Result::kRefused:
        counters_.refused.fetch_add(1);
        log(str_cat("refused a request from ", c.peer, ": ", c.reader.why()));
        end_with(c, Reply::kRefused, c.reader.why());
        return true;
      case tcp::RequestReader::Result::kMalformed:
        counters_.malformed.fetch_add(1);
        log(str_cat("closed the connection from ", c.peer,
                    ": not the store's protocol (", c.reader.why(), ")"));
        flush(c);  // best effort: the requests before it are answered
        return false;
    }
  }
  // Bytes past a parked or refused request are never read (see wanted()),
  // so nothing is left over here.
  return true;
}

bool TcpStoreServer::Loop::drop_input(Connection& c) {
  for (size_t budget = kReadBudget; budget > 0;) {
    const ssize_t n = ::recv(c.fd.get(), chunk_.data(), chunk_.size(), 0);
    if (n > 0) {
      budget -= std::min(budget, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

void TcpStoreServer::Loop::end_with(Connection& c, Reply status,
                                    const std::string& message) {
  const size_t n = std::min(message.size(), tcp::kMaxMessageBytes);
  reply(c, status, reinterpret_cast<const uint8_t*>(message.data()), n);
  c.closing = true;
  c.closing_since = Clock::now();
}

void TcpStoreServer::Loop::handle(uint64_t id, Connection& c, tcp::Request r) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  std::string& key = r.key;
  switch (r.op) {
    case Op::kAuth:
      if (options_.token.empty() || same_token(key, options_.token)) {
        if (!c.authenticated && !admit(id, c)) return;
        c.reader.require_auth(false);
        reply(c, Reply::kOk);
      } else {
        counters_.denied.fetch_add(1);
        note(kNoToken,
             str_cat("refused the connection from ", c.peer, ": wrong token"));
        end_with(c, Reply::kDenied,
                 "the store refused this client's token: GANG_STORE_TOKEN "
                 "(or ?token= in the url) differs from the server's");
      }
      return;
    case Op::kSet: {
      auto value = std::make_shared<Value>();
      value->reserved = r.reserved.split(r.value.size());
      value->bytes = std::move(r.value);
      const auto it = data_.find(key);
      if (it != data_.end()) {
        // The key's cost is paid already; what the request reserved for
        // it goes back when r does.
        it->second.value = std::move(value);
      } else {
        Entry e;
        e.value = std::move(value);
        e.key_cost = std::move(r.reserved);
        data_.emplace(key, std::move(e));
      }
      reply(c, Reply::kOk);
      wake_waiters(key);
      return;
    }
    case Op::kGet:
    case Op::kWait: {
      const auto it = data_.find(key);
      if (it == data_.end()) {
        park(id, c, r.op, std::move(key));
      } else if (r.op == Op::kGet) {
        reply(c, Reply::kOk, nullptr, 0, it->second.value);
      } else {
        reply(c, Reply::kOk);
      }
      return;
    }
    case Op::kAdd: {
      const auto delta = static_cast<int64_t>(tcp::get_u64(r.value.data()));
      const auto it = data_.find(key);
      Bytes current;
      if (it != data_.end()) {
        const Buffer& b = it->second.value->bytes;
        current.assign(b.data(), b.data() + b.size());
      }
      int64_t sum = 0;
      try {
        sum = detail::add_decimal(key, it == data_.end() ? nullptr : &current,
                                  delta);
      } catch (const Error& e) {
        const std::string message = e.what();
        reply(c, Reply::kBadAdd,
              reinterpret_cast<const uint8_t*>(message.data()),
              std::min(message.size(), tcp::kMaxMessageBytes));
        return;
      }
      const Bytes text = detail::decimal_bytes(sum);
      r.reserved.reset();
      // A new key must fit; a counter that exists only changes (its old
      // value goes as the new one comes), so heartbeats keep working in a
      // full store.
      Reservation taken = it == data_.end()
                              ? Reservation(&budget_, text.size() + key.size() +
                                                          kEntryOverheadBytes)
                              : Reservation::forced(&budget_, text.size());
      if (!taken.valid()) {
        counters_.refused.fetch_add(1);
        end_with(c, Reply::kRefused,
                 str_cat("the server is full: it holds ", budget_.held(),
                         " bytes, its limit (GANG_STORE_MAX_TOTAL_BYTES)"));
        return;
      }
      auto value = std::make_shared<Value>();
      value->bytes = Buffer(text.data(), text.size());
      value->reserved = taken.split(text.size());
      if (it != data_.end()) {
        it->second.value = std::move(value);
      } else {
        Entry e;
        e.value = std::move(value);
        e.key_cost = std::move(taken);
        data_.emplace(key, std::move(e));
      }
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
                                 const uint8_t* data, size_t n,
                                 ValuePtr value) {
  tcp::ReplyHeader h;
  h.status = status;
  h.value_len = value ? value->bytes.size() : n;
  OutItem item;
  item.head.resize(tcp::kReplyHeaderBytes + n);
  tcp::encode_reply(h, item.head.data());
  if (n > 0) std::memcpy(item.head.data() + tcp::kReplyHeaderBytes, data, n);
  // What a reply copies counts against the total until it is sent; a value
  // it sends is counted already, once, however many replies hold it.
  item.head_cost = Reservation::forced(&budget_, item.head.size());
  item.value = std::move(value);
  if (c.queued == 0) c.last_write = Clock::now();
  c.queued += item.size();
  touch(c);
  c.out.push_back(std::move(item));
}

void TcpStoreServer::Loop::park(uint64_t id, Connection& c, Op op,
                                std::string key) {
  waiters_[key].push_back(id);
  touch(c);
  c.parked = true;
  c.parked_op = op;
  c.parked_key = std::move(key);
}

void TcpStoreServer::Loop::wake_waiters(const std::string& key) {
  const auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  const std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  const ValuePtr& value = data_.at(key).value;
  for (const uint64_t id : ids) {
    const auto conn = conns_.find(id);
    if (conn == conns_.end()) continue;
    Connection& c = *conn->second;
    if (!c.parked || c.parked_key != key) continue;
    c.parked = false;
    c.parked_key.clear();
    if (c.parked_op == Op::kGet) {
      reply(c, Reply::kOk, nullptr, 0, value);
    } else {
      reply(c, Reply::kOk);
    }
    // Served after the current request, not inside it, so a chain of
    // wake-ups never nests.
    ready_.push_back(id);
  }
}

void TcpStoreServer::Loop::drain_ready() {
  const std::vector<uint64_t> ids = std::move(ready_);
  ready_.clear();
  for (const uint64_t id : ids) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    touch(*it->second);
    // Its next requests, should they already wait in the socket, are
    // reported by the loop now that it reads the connection again.
    bool keep = false;
    try {
      keep = flush(*it->second);
    } catch (const std::exception&) {
      keep = false;
    }
    if (!keep) close(id);
  }
}

bool TcpStoreServer::Loop::flush(Connection& c) {
  while (c.queued > 0) {
    // Up to 32 items per call: headers and the values behind them.
    iovec iov[64];
    int count = 0;
    for (const OutItem& item : c.out) {
      if (count + 2 > 64) break;
      size_t skip = item.sent;
      if (skip < item.head.size()) {
        iov[count++] = {const_cast<uint8_t*>(item.head.data()) + skip,
                        item.head.size() - skip};
        skip = 0;
      } else {
        skip -= item.head.size();
      }
      if (item.value && skip < item.value->bytes.size()) {
        iov[count++] = {const_cast<uint8_t*>(item.value->bytes.data()) + skip,
                        item.value->bytes.size() - skip};
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL);
    if (n > 0) {
      c.last_write = Clock::now();
      auto sent = static_cast<size_t>(n);
      c.queued -= sent;
      while (sent > 0) {
        OutItem& front = c.out.front();
        const size_t left = front.size() - front.sent;
        if (sent >= left) {
          sent -= left;
          c.out.pop_front();
        } else {
          front.sent += sent;
          sent = 0;
        }
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  // A refused connection says no more once its reply is out.
  if (c.closing && !c.write_shut) {
    ::shutdown(c.fd.get(), SHUT_WR);
    c.write_shut = true;
  }
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
  readiness_.remove(c.fd.get());
  pending_.erase(id);
  conns_.erase(it);
}

TcpStoreServer::TcpStoreServer(const std::string& host, int port,
                               ServerOptions options) {
  if (port < 0 || port > 65535) {
    fail(Status::kInvalidArgument, "store server: port ", port,
         " is out of range");
  }
  if (host.empty()) {
    fail(Status::kInvalidArgument,
         "store server: no host to listen on (0.0.0.0 for every interface)");
  }
  check_token(options.token, "store server");
  Listeners listeners = listen_on(host, port);
  port_ = listeners.port;
  addresses_ = listeners.addresses;
  // Warned, not refused: a job across machines needs a server they can
  // reach, and under slurm, mpirun or MASTER_ADDR rank 0 serves every
  // interface without being asked; refusing would break every such job
  // that has no token today. This machine's other users are still kept out
  // by the user check; only other machines are not.
  if (options.token.empty() && !loopback_only() && options.log) {
    std::string where;
    for (const std::string& a : addresses_) {
      where += str_cat(where.empty() ? "" : ", ", base::host_port(a, port_));
    }
    try {
      options.log(str_cat(
          "warning: serving ", where,
          ", which other machines may reach, without a token: a process on "
          "any of them that reaches this port can join the jobs of this "
          "store and change their results (users of this machine are ",
          options.allowed_users.any ? "not checked either, "
                                      "GANG_STORE_ALLOW_USERS=any"
                                    : "checked by uid",
          "). Set GANG_STORE_TOKEN to one secret for the server and every "
          "rank, or serve on 127.0.0.1 for a job on one machine"));
    } catch (...) {
    }
  }
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    fail(Status::kSystem,
         "store server: cannot create an eventfd: ", errno_text(errno));
  }
  loop_ = std::make_unique<Loop>(std::move(listeners), std::move(wake),
                                 std::move(options));
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

std::string TcpStoreServer::local_address() const {
  const std::string& first = addresses_.front();
  if (first == "::" || first == "0.0.0.0") return "127.0.0.1";
  return first;
}

bool TcpStoreServer::loopback_only() const {
  return std::all_of(addresses_.begin(), addresses_.end(), is_loopback);
}

ServerStats TcpStoreServer::stats() const { return loop_->stats(); }

}  // namespace gang::store
