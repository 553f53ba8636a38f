#include "backends/gloo/gloo_pairs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>
#include <gloo/transport/tcp/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/gloo/gloo_address_list.h"
#include "backends/gloo/gloo_loop_turns.h"
#include "base/big_endian.h"
#include "base/deadline.h"
#include "base/descriptors.h"
#include "base/error.h"
#include "base/secret.h"
#include "base/text.h"
#include "core/log.h"
#include "store/store.h"

namespace gang::backends::gloo_impl {

namespace {

namespace tcp = ::gloo::transport::tcp;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Connections the listening port holds while their proofs arrive, and how
// long one may take (the connecting rank sends it the moment it connects).
constexpr size_t kCandidates = 8;
constexpr auto kProofWithin = std::chrono::seconds(10);
// Connections the kernel queues before the event loop accepts them: every
// lower rank may connect at once.
constexpr int kBacklog = 128;
// A connection's first bytes: the connecting rank, the connection's
// generation (both 4 bytes, big-endian), then the proof.
constexpr size_t kRankBytes = 4;
constexpr size_t kGenerationBytes = 4;
constexpr size_t kHelloBytes = kRankBytes + kGenerationBytes + base::kDigestBytes;

// A listening address as a rank publishes it (gloo_address_list.h): 23
// bytes where Gloo's own form takes 136.
std::vector<char> published(const sockaddr_storage& ss) {
  std::vector<char> out(kAddressBytes, 0);
  auto* b = reinterpret_cast<uint8_t*>(out.data());
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    b[0] = 6;
    std::memcpy(b + 1, &a.sin6_port, 2);  // already big-endian
    base::put_be32(b + 3, a.sin6_scope_id);
    std::memcpy(b + 7, &a.sin6_addr, 16);
  } else if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    b[0] = 4;
    std::memcpy(b + 1, &a.sin_port, 2);
    std::memcpy(b + 7, &a.sin_addr, 4);
  } else {
    fail(Status::kInternal, "gloo: a listening address of family ", ss.ss_family);
  }
  return out;
}

// The socket address a rank published; throws Gloo's exception for one
// that is not (a connection made on first use reports it as its failure).
sockaddr_storage socket_address(const std::vector<char>& p) {
  sockaddr_storage ss{};
  const auto* b = reinterpret_cast<const uint8_t*>(p.data());
  if (p.size() == kAddressBytes && b[0] == 6) {
    auto& a = reinterpret_cast<sockaddr_in6&>(ss);
    a.sin6_family = AF_INET6;
    std::memcpy(&a.sin6_port, b + 1, 2);
    a.sin6_scope_id = base::get_be32(b + 3);
    std::memcpy(&a.sin6_addr, b + 7, 16);
  } else if (p.size() == kAddressBytes && b[0] == 4) {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_port, b + 1, 2);
    std::memcpy(&a.sin_addr, b + 7, 4);
  } else {
    GLOO_THROW_IO_EXCEPTION("a published listening address of ", p.size(),
                            " bytes, family ", p.empty() ? -1 : int{b[0]});
  }
  return ss;
}

std::string proof(const std::string& secret, int connector, int listener,
                  uint32_t generation, const std::vector<char>& listener_address) {
  std::string message = str_cat("gang gloo pair v3 ", connector, " ", listener, " ",
                                generation, " ");
  message.append(listener_address.begin(), listener_address.end());
  const base::Digest d = base::hmac_sha256(secret, message);
  return std::string(d.begin(), d.end());
}

void put_u32(std::string& s, uint32_t v) {
  unsigned char b[4];
  base::put_be32(b, v);
  s.append(reinterpret_cast<const char*>(b), sizeof b);
}

uint32_t get_u32(const char* p) { return base::get_be32(reinterpret_cast<const unsigned char*>(p)); }

std::string hello(const std::string& secret, int connector, int listener,
                  uint32_t generation, const std::vector<char>& listener_address) {
  std::string h;
  put_u32(h, static_cast<uint32_t>(connector));
  put_u32(h, generation);
  return h + proof(secret, connector, listener, generation, listener_address);
}

// This file reads Gloo's Pair through headers that must describe the
// installed library (see compat/gloo/common/memory.h): a fresh pair is
// LISTENING on a socket bound to the address it reports. Anything else
// means the headers and the library disagree; stop before using them.
void check_layout(bool listening, int fd, const tcp::Address& self) {
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  const sockaddr_storage& reported = self.getSockaddr();
  const bool same =
      listening && fd >= 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0 &&
      bound.ss_family == reported.ss_family &&
      std::memcmp(&bound, &reported,
                  bound.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                              : sizeof(sockaddr_in)) == 0;
  if (!same) {
    fail(Status::kInternal, "gloo: the Gloo headers this library was built "
         "with do not match the installed libgloo (a pair is not where "
         "they place it); rebuild gang against the installed Gloo");
  }
}

class MeshPairs;

// The connection of this rank with one peer. Gloo's Pair opens a listening
// socket when it is made; this one closes it at once (connections arrive at
// the rank's Listener) and then either connects out or adopts a connection
// the Listener accepted.
class GangPair final : public tcp::Pair {
 public:
  GangPair(tcp::Context* context, tcp::Device* device, int peer, Millis timeout)
      : tcp::Pair(context, device, peer, timeout) {
    std::lock_guard<std::mutex> lock(m_);
    check_layout(state_ == LISTENING, fd_, self_);
    {
      const PromptTurns prompt(device_);
      device_->unregisterDescriptor(fd_, this);
    }
    ::close(fd_);
    fd_ = -1;
    // The loop thread learns of this pair through epoll, which
    // ThreadSanitizer cannot see; its first look at connected_ acquires
    // this store, and with it everything constructed above.
    connected_.store(false, std::memory_order_release);
  }

  // Closes here, not in Gloo's destructor, so that no event of this pair
  // reaches a half-destroyed object. Closing waits for the event loop's
  // next tick, which ThreadSanitizer cannot see (Gloo is not instrumented);
  // taking events_mu_ afterwards shows it that the loop's last call ended.
  ~GangPair() override {
    {
      const PromptTurns prompt(device_);
      std::lock_guard<std::mutex> lock(m_);
      if (state_ != CLOSED) changeState(CLOSED);
    }
    std::lock_guard<std::mutex> events(events_mu_);
  }

  // Closing leaves the loop, which waits for its next turn.
  void close() override {
    const PromptTurns prompt(device_);
    tcp::Pair::close();
  }

  // A pair that fails fails the sends queued behind others too
  // (FailableBuffer), which Gloo's failing pair leaves to their deadlines.
  // The lock is held, by Gloo and by this class.
  void changeState(state next) noexcept override {
    if (next == CLOSED && state_ != CLOSED) fail_what_is_left();
    tcp::Pair::changeState(next);
  }

  // Connects to `address` and sends `first` (the rank and proof) before
  // anything else; returns connected or throws.
  void connect_out(const std::vector<char>& address, const std::string& first) {
    std::unique_lock<std::mutex> lock(m_);
    throwIfException();
    peer_ = tcp::Address(socket_address(address));
    first_ = first;
    const sockaddr_storage& to = peer_.getSockaddr();
    fd_ = ::socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      signalAndThrowException(str_cat("socket: ", base::errno_text(errno)));
    }
    const socklen_t len =
        to.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&to), len) != 0 &&
        errno != EINPROGRESS) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      signalAndThrowException(str_cat("connect ", peer_.str(), ": ",
                                      base::errno_text(err)));
    }
    changeState(CONNECTING);
    device_->registerDescriptor(fd_, EPOLLIN | EPOLLOUT, this);
    waitUntilConnected(lock, true);
  }

  // The connection failed (its peer closed it, or an error), as far as a
  // look without waiting can tell.
  bool broken() {
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    return lock && ex_ != nullptr;
  }

  // Loop thread, on a pair nobody else has seen yet: `fd` proved the
  // secret and becomes the connection.
  void adopt(int fd) {
    std::lock_guard<std::mutex> lock(m_);
    fd_ = fd;
    connected_.store(true, std::memory_order_release);
    handleConnected();
  }

  void handleEvents(int events) override {
    // The first look at connected_ acquires the constructor's store (the
    // loop learns of this pair through epoll, which ThreadSanitizer cannot
    // see), events_mu_ included. The mutex is never contended but by the
    // destructor, after the pair left the loop.
    (void)connected_.load(std::memory_order_acquire);
    std::lock_guard<std::mutex> guard(events_mu_);
    if (connected_.load(std::memory_order_acquire)) {
      // Gloo's handler only tries the pair's lock and leaves the event for
      // the next turn of the loop when another thread holds it (a send or
      // receive being posted). The event stays ready, so the loop turns at
      // once, again and again: on a busy machine it burns the CPU the
      // holder needs to let go, and the operation waits for the scheduler's
      // next tick (docs/benchmarks.md, "The 4 ms mode"). Give way instead.
      if (!m_.try_lock()) {
        sched_yield();
        return;
      }
      m_.unlock();
      tcp::Pair::handleEvents(events);
      return;
    }
    // As Gloo's own handler: never wait for the lock on the loop thread (a
    // thread holding it may be waiting for the loop).
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    if (!lock) return;
    try {
      // Nothing is accepted here: the listening socket Gloo opened is
      // closed in the constructor.
      if (state_ == CONNECTING) finish_connecting();
    } catch (const std::exception& e) {
      if (ex_ == nullptr) signalException(e.what());
    }
  }

 private:
  // Lock held, loop thread: the connection completed or failed; on
  // success the rank and proof go first.
  void finish_connecting() {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      signalException(str_cat("connect ", peer_.str(), ": ", base::errno_text(err)));
      return;
    }
    const ssize_t n = ::send(fd_, first_.data(), first_.size(), MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(first_.size())) {
      signalException(str_cat("connect ", peer_.str(),
                              ": could not send the proof of the gang's secret: ",
                              n < 0 ? base::errno_text(errno) : "short write"));
      return;
    }
    connected_.store(true, std::memory_order_release);
    handleConnected();
  }

  // Gloo's failure path only (ex_ set), on the thread that found the
  // failure, as Gloo tells the others. Not on a close without a failure:
  // that comes from a thread of the gang's own (a fence, an abort, the
  // gang's end) while the waiting threads may be destroying their buffers,
  // which a pair holds no reference on.
  void fail_what_is_left() noexcept {
    if (ex_ == nullptr) return;
    for (tcp::Op& op : tx_) {
      if (op.getOpcode() != tcp::Op::SEND_UNBOUND_BUFFER) continue;
      ::gloo::NonOwningPtr<tcp::UnboundBuffer> buf(op.ubuf);
      if (!buf) continue;
      if (auto* b = dynamic_cast<FailableBuffer*>(buf.operator->())) b->fail(ex_);
    }
  }

  std::string first_;
  std::atomic<bool> connected_{false};
  std::mutex events_mu_;  // held by the loop thread while it handles events
};

// A descriptor the process keeps for a listener that finds none left: it
// lets go of it to accept and close a waiting connection, then takes it
// back. One for every listener of the process.
struct Reserve {
  std::mutex mu;
  int fd = -1;
  bool said = false;  // the warning, once
};

Reserve& reserve() {
  static Reserve* r = new Reserve();  // never destroyed: loop threads use it
  return *r;
}

class Listener;

// One accepted connection whose proof has not arrived yet. Its handler
// stays valid as long as the listener: the event loop may still hold an
// event for a slot that was just emptied (or refilled) in the same tick.
struct Candidate final : tcp::Handler {
  Listener* listener = nullptr;
  int fd = -1;
  size_t got = 0;
  char hello[kHelloBytes] = {};
  Clock::time_point since;
  void handleEvents(int events) override;
};

// The rank's listening port for its gang, a Gloo Pair that never connects
// (Gloo's Pair binds to the device's address and registers with its loop).
class Listener final : public tcp::Pair {
 public:
  Listener(MeshPairs* pairs, tcp::Context* context, tcp::Device* device,
           Millis timeout, std::string secret)
      : tcp::Pair(context, device, context->rank, timeout),
        pairs_(pairs), secret_(std::move(secret)) {
    std::lock_guard<std::mutex> lock(m_);
    for (Candidate& c : candidates_) c.listener = this;
    check_layout(state_ == LISTENING, fd_, self_);
    if (::listen(fd_, kBacklog) != 0) {
      fail(Status::kSystem, "gang_create: listen: ", base::errno_text(errno));
    }
    // The listening socket must never block the event loop.
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    {
      Reserve& r = reserve();
      std::lock_guard<std::mutex> lock(r.mu);
      if (r.fd < 0) r.fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    address_ = published(self_.getSockaddr());
    // The loop's first look at ready_ acquires everything above (epoll
    // hands it this object unseen by ThreadSanitizer).
    ready_.store(true, std::memory_order_release);
  }

  // As GangPair's: events_mu_ shows ThreadSanitizer the loop is done.
  ~Listener() override {
    shut();
    std::lock_guard<std::mutex> events(events_mu_);
  }

  const std::vector<char>& listening_address() const { return address_; }

  // Stops listening and closes every waiting connection.
  void shut() noexcept {
    const PromptTurns prompt(device_);
    std::lock_guard<std::mutex> lock(m_);
    drop_all();
    if (state_ != CLOSED) changeState(CLOSED);
  }

  // Closes connections whose proofs are late. Any thread.
  void sweep() {
    std::lock_guard<std::mutex> lock(m_);
    refuse_late();
  }

  void handleEvents(int) override {
    if (!ready_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> guard(events_mu_);
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    if (!lock || state_ != LISTENING) return;
    try {
      refuse_late();
      accept_candidates();
    } catch (const std::exception& e) {
      GANG_LOG(kWarn, "gloo: rank ", context_->rank, "'s listening port: ", e.what());
    }
  }

  void on_candidate(Candidate& c);

 private:
  // Accepts and closes one waiting connection when no descriptor is left,
  // through a descriptor the process keeps in reserve for this (one for
  // all listeners), and says so once.
  void turn_away_one() {
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.fd >= 0) {
      ::close(r.fd);
      r.fd = -1;
    }
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    r.fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!r.said) {
      r.said = true;
      std::string why;
      base::out_of_descriptors(&why);
      GANG_LOG(kWarn, "gloo: rank ", context_->rank, " turned a connection away: ",
               why.empty() ? base::errno_text(EMFILE) : why);
    }
  }

  // Lock held, loop thread.
  void accept_candidates() {
    for (;;) {
      const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: the waiting connection is turned away (so
          // the loop does not spin on it, and its rank fails at once), and
          // this rank's own wait says why (base/descriptors.h).
          turn_away_one();
          return;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          GANG_LOG(kWarn, "gloo: rank ", context_->rank, ": accept: ",
                   base::errno_text(errno));
        }
        return;
      }
      Candidate* slot = nullptr;
      for (Candidate& c : candidates_) {
        if (c.fd < 0) {
          slot = &c;
          break;
        }
        if (slot == nullptr || c.since < slot->since) slot = &c;
      }
      if (slot->fd >= 0) refuse(*slot, "was crowded out by newer connections");
      slot->fd = fd;
      slot->got = 0;
      slot->since = Clock::now();
      device_->registerDescriptor(fd, EPOLLIN, slot);
    }
  }

  void refuse_late() {
    const auto now = Clock::now();
    for (Candidate& c : candidates_) {
      if (c.fd >= 0 && now - c.since > kProofWithin) {
        refuse(c, "did not prove the gang's secret in time");
      }
    }
  }

  void refuse(Candidate& c, const char* why) noexcept {
    try {
      const tcp::Address from = tcp::Address::fromPeerName(c.fd);
      GANG_LOG(kWarn, "gloo: rank ", context_->rank, " closed a connection from ",
               from.str(), " that ", why);
    } catch (...) {
    }
    drop(c);
  }

  void drop(Candidate& c) noexcept {
    if (c.fd < 0) return;
    try {
      device_->unregisterDescriptor(c.fd, &c);
    } catch (...) {
    }
    ::close(c.fd);
    c.fd = -1;
    c.got = 0;
  }

  void drop_all() noexcept {
    for (Candidate& c : candidates_) drop(c);
  }

  MeshPairs* const pairs_;
  const std::string secret_;
  std::vector<char> address_;
  std::array<Candidate, kCandidates> candidates_;
  std::mutex events_mu_;  // held by the loop thread while it handles events
  std::atomic<bool> ready_{false};
};

void Candidate::handleEvents(int) { listener->on_candidate(*this); }

// The transport context of the mesh: pairs made on first use, and again
// after a fence (see gloo_pairs.h).
class MeshPairs final : public tcp::Context, public Mesh {
 public:
  MeshPairs(std::shared_ptr<tcp::Device> device, std::shared_ptr<store::Store> store,
            std::shared_ptr<store::Store> addresses_store, int rank, int size,
            std::string secret, Millis timeout)
      : tcp::Context(std::move(device), rank, size),
        store_(std::move(store)),
        addresses_store_(std::move(addresses_store)),
        secret_(std::move(secret)),
        addresses_(static_cast<size_t>(size)),
        connecting_(static_cast<size_t>(size), false),
        current_(new std::atomic<Conn*>[static_cast<size_t>(size)]()) {
    setTimeout(timeout);
    listener_ = std::make_unique<Listener>(this, this, device_.get(), timeout, secret_);
  }

  // The listener goes first: once it is shut, no pair is adopted any more.
  // Then every connection ever made, newest first.
  ~MeshPairs() override {
    listener_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    for (int peer = 0; peer < size; ++peer) {
      Conn* c = current_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
      while (c != nullptr) {
        Conn* older = c->older;
        delete c;
        c = older;
      }
    }
  }

  // Gloo's Context::recvFromAny over this mesh's own pairs (Gloo's reads
  // the base class's, which a mesh leaves empty): connects to each sender,
  // takes a send already announced by one of them, else leaves the
  // receive for the first pair a matching send arrives on.
  void recv_from_any(tcp::UnboundBuffer* buf, uint64_t slot, size_t offset, size_t nbytes,
                     std::vector<int> from) override {
    uint32_t generation = 0;
    for (int peer : from) pair(peer, &generation);
    for (;;) {
      const int peer = recvFromAnyFindRank(buf, slot, offset, nbytes, from);
      if (peer < 0) return;
      auto* p = dynamic_cast<tcp::Pair*>(pair(peer, &generation).get());
      if (p == nullptr) {
        GLOO_THROW_INVALID_OPERATION_EXCEPTION("no pair of rank ", tcp::Context::rank,
                                               " with rank ", peer);
      }
      if (p->tryRecv(buf, slot, offset, nbytes)) return;
    }
  }

  int mesh_rank() const override { return tcp::Context::rank; }
  int mesh_size() const override { return tcp::Context::size; }
  store::Store& store() override { return *store_; }
  bool reads_on_first_use() const override { return addresses_store_ != nullptr; }

  const std::vector<char>& address() const { return listener_->listening_address(); }
  void set_addresses(std::vector<std::vector<char>> all) { addresses_ = std::move(all); }

  std::unique_ptr<::gloo::transport::Pair>& getPair(int peer) override {
    uint32_t generation = 0;
    return pair(peer, &generation);
  }

  std::unique_ptr<::gloo::transport::Pair>& pair(int peer, uint32_t* generation) override {
    if (peer < 0 || peer >= size || peer == tcp::Context::rank) {
      GLOO_THROW_INVALID_OPERATION_EXCEPTION("no pair of rank ", tcp::Context::rank,
                                             " with rank ", peer);
    }
    const auto i = static_cast<size_t>(peer);
    // Every transfer asks: a live connection is found without a lock. One
    // its peer closed (a fence there) is left for a new one.
    if (Conn* c = current_[i].load(std::memory_order_acquire);
        c != nullptr && alive(*c)) {
      *generation = c->generation;
      return c->pair;
    }
    std::unique_lock<std::mutex> lock(mu_);
    // A mesh that only ever served one gang never makes a connection
    // again: the peer closed it (it failed, aborted or died), and so has
    // this gang.
    if (Conn* c = current_[i].load(std::memory_order_relaxed);
        c != nullptr && !shared.load() && !alive(*c)) {
      throw ::gloo::IoException(str_cat("the connection with rank ", peer, " was closed"));
    }
    const auto until = base::deadline_after(getTimeout());
    if (peer > tcp::Context::rank) {
      // This rank connects; a second thread asking meanwhile waits for it.
      for (;;) {
        Conn* c = current_[i].load(std::memory_order_relaxed);
        if (c != nullptr && alive(*c)) {
          *generation = c->generation;
          return c->pair;
        }
        if (!connecting_[i]) break;
        wait(lock, until, peer, "connect to");
      }
      if (closed_) throw ::gloo::IoException("the gang's connections were closed");
      Conn* older = current_[i].load(std::memory_order_relaxed);
      const uint32_t next = older != nullptr ? older->generation + 1 : 1;
      connecting_[i] = true;
      lock.unlock();
      std::unique_ptr<GangPair> made;
      try {
        const std::vector<char>& to = address_of(peer, until);
        made = std::make_unique<GangPair>(this, device_.get(), peer, getTimeout());
        made->connect_out(to, hello(secret_, tcp::Context::rank, peer, next, to));
      } catch (...) {
        lock.lock();
        connecting_[i] = false;
        cv_.notify_all();
        throw;
      }
      lock.lock();
      connecting_[i] = false;
      cv_.notify_all();
      if (closed_) {
        lock.unlock();
        made->close();
        throw ::gloo::IoException("the gang's connections were closed");
      }
      Conn* c = publish(i, std::move(made), next);
      *generation = c->generation;
      return c->pair;
    }
    // The lower rank connects to this one (again, after a fence).
    for (;;) {
      Conn* c = current_[i].load(std::memory_order_relaxed);
      if (c != nullptr && alive(*c)) {
        *generation = c->generation;
        return c->pair;
      }
      wait(lock, until, peer, "be connected to by");
    }
  }

  // Loop thread: a connection of `generation` from `peer` proved the
  // secret. False when this rank takes no more connections or already has
  // one at least as new.
  bool adopt(int peer, uint32_t generation, int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto i = static_cast<size_t>(peer);
    Conn* older = current_[i].load(std::memory_order_relaxed);
    if (closed_ || (older != nullptr && generation <= older->generation)) return false;
    auto made = std::make_unique<GangPair>(this, device_.get(), peer, getTimeout());
    made->adopt(fd);
    // The peer left the older connection behind: its end is closed, and
    // ours closes when that arrives.
    if (older != nullptr) older->dead.store(true, std::memory_order_release);
    publish(i, std::move(made), generation);
    return true;
  }

  void fence(int peer, uint32_t generation) noexcept override {
    if (peer < 0 || peer >= size || generation == 0) return;
    ::gloo::transport::Pair* open = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Conn* c = current_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
           c != nullptr; c = c->older) {
        if (c->generation != generation) continue;
        if (!c->dead.exchange(true, std::memory_order_acq_rel)) open = c->pair.get();
        break;
      }
      cv_.notify_all();
    }
    if (open == nullptr) return;
    try {
      open->close();
    } catch (...) {
    }
  }

  void close() noexcept override {
    std::vector<::gloo::transport::Pair*> open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      for (int peer = 0; peer < size; ++peer) {
        Conn* c = current_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
        if (c != nullptr && !c->dead.exchange(true)) open.push_back(c->pair.get());
      }
      cv_.notify_all();
    }
    if (listener_) listener_->shut();
    for (auto* p : open) {
      try {
        p->close();
      } catch (...) {
      }
    }
  }

  bool broken(int peer) override {
    if (peer < 0 || peer >= size || peer == tcp::Context::rank) return false;
    Conn* c = current_[static_cast<size_t>(peer)].load(std::memory_order_acquire);
    return c != nullptr && !alive(*c);
  }

 private:
  // One connection with a peer; the ones before it stay (closed) until the
  // mesh goes, so that a thread still holding one never holds freed memory.
  struct Conn {
    std::unique_ptr<::gloo::transport::Pair> pair;
    uint32_t generation = 0;
    std::atomic<bool> dead{false};
    Conn* older = nullptr;
  };

  // Not fenced here, not closed by the peer, not broken; once not alive,
  // never again.
  static bool alive(Conn& c) {
    if (c.dead.load(std::memory_order_acquire)) return false;
    if (!static_cast<GangPair*>(c.pair.get())->broken()) return true;
    c.dead.store(true, std::memory_order_release);
    return false;
  }

  // Lock held: makes `made` the connection with peer i.
  Conn* publish(size_t i, std::unique_ptr<GangPair> made, uint32_t generation) {
    auto* c = new Conn();
    c->pair = std::move(made);
    c->generation = generation;
    c->older = current_[i].load(std::memory_order_relaxed);
    current_[i].store(c, std::memory_order_release);
    cv_.notify_all();
    return c;
  }

  // The listening address of higher rank `peer`, from the list read at
  // creation or, on a mesh that reads them on first use, from its store of
  // addresses (once: later connections reuse it). Only the thread connecting to
  // `peer` calls it, so entry `peer` is its alone meanwhile.
  const std::vector<char>& address_of(int peer, Clock::time_point until) {
    std::vector<char>& a = addresses_.at(static_cast<size_t>(peer));
    if (!a.empty()) return a;
    store::Bytes read;
    try {
      const auto left = std::chrono::duration_cast<Millis>(until - Clock::now());
      read = addresses_store_->get(std::to_string(peer), std::max(Millis(1), left));
    } catch (const Error& e) {
      if (e.status() == Status::kTimeout) {
        throw ConnectTimeout(str_cat("rank ", tcp::Context::rank, " waited ",
                                     getTimeout().count(), " ms for rank ", peer,
                                     "'s listening address in the store"));
      }
      GLOO_THROW_IO_EXCEPTION("reading rank ", peer,
                              "'s listening address from the store: ", e.what());
    }
    if (read.size() != kAddressBytes) {
      GLOO_THROW_IO_EXCEPTION("rank ", peer, " published a ", read.size(),
                              "-byte listening address where ", kAddressBytes, " are expected");
    }
    a.assign(read.begin(), read.end());
    return a;
  }

  // Waits a slice for a change; throws once closed or past `until`. Late
  // proofs are swept meanwhile (a silent connection never wakes the loop).
  void wait(std::unique_lock<std::mutex>& lock, Clock::time_point until, int peer,
            const char* what) {
    if (closed_) throw ::gloo::IoException("the gang's connections were closed");
    const auto now = Clock::now();
    if (now >= until) {
      throw ConnectTimeout(str_cat("rank ", tcp::Context::rank, " waited ",
                                        getTimeout().count(), " ms to ", what,
                                        " rank ", peer));
    }
    cv_.wait_for(lock, std::min<Clock::duration>(until - now, std::chrono::seconds(1)));
    if (Clock::now() - last_sweep_ > std::chrono::seconds(1)) {
      last_sweep_ = Clock::now();
      lock.unlock();
      listener_->sweep();
      lock.lock();
    }
  }

  const std::shared_ptr<store::Store> store_;
  // Where the peers' addresses are read on first use; null when the list
  // is read at creation.
  const std::shared_ptr<store::Store> addresses_store_;
  const std::string secret_;
  // Per rank its listening address; empty until read, on a mesh that reads
  // them on first use.
  std::vector<std::vector<char>> addresses_;
  std::unique_ptr<Listener> listener_;
  std::mutex mu_;  // connecting_, closed_, and every change of current_
  std::condition_variable cv_;
  std::vector<bool> connecting_;
  std::unique_ptr<std::atomic<Conn*>[]> current_;  // per peer: the newest connection
  bool closed_ = false;
  Clock::time_point last_sweep_;
};

void Listener::on_candidate(Candidate& c) {
  if (!ready_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> guard(events_mu_);
  std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
  if (!lock || c.fd < 0 || state_ != LISTENING) return;
  try {
    while (c.got < sizeof c.hello) {
      const ssize_t n = ::recv(c.fd, c.hello + c.got, sizeof c.hello - c.got, 0);
      if (n > 0) {
        c.got += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;  // the rest comes with a later event
      } else {
        refuse(c, "closed before it proved the gang's secret");
        return;
      }
    }
    const uint32_t from = get_u32(c.hello);
    const uint32_t generation = get_u32(c.hello + kRankBytes);
    const int me = context_->rank;
    // Only a lower rank connects to this one.
    const std::string expected =
        from < static_cast<uint32_t>(me)
            ? proof(secret_, static_cast<int>(from), me, generation, address_)
            : std::string(base::kDigestBytes, '\0');
    if (from >= static_cast<uint32_t>(me) ||
        !base::equal_in_constant_time(
            std::string(c.hello + kRankBytes + kGenerationBytes, base::kDigestBytes),
            expected)) {
      refuse(c, "did not prove the gang's secret");
      return;
    }
    const int fd = c.fd;
    device_->unregisterDescriptor(fd, &c);
    c.fd = -1;
    c.got = 0;
    if (!pairs_->adopt(static_cast<int>(from), generation, fd)) {
      GANG_LOG(kWarn, "gloo: rank ", me, " closed a connection from rank ", from,
               " of generation ", generation, ", which is not newer than the one it has");
      ::close(fd);
    }
  } catch (const std::exception& e) {
    GANG_LOG(kWarn, "gloo: rank ", context_->rank, "'s listening port: ", e.what());
    drop(c);
  }
}

}  // namespace

std::shared_ptr<Mesh> connect_mesh(std::shared_ptr<store::Store> shared_store,
                                   std::shared_ptr<::gloo::transport::Device> device,
                                   int rank, int size, const std::string& secret,
                                   Millis timeout, Millis pair_timeout,
                                   std::shared_ptr<store::Store> on_first_use) {
  store::Store& store = *shared_store;
  auto tcp_device = std::dynamic_pointer_cast<tcp::Device>(device);
  if (!tcp_device) {
    fail(Status::kInternal, "gloo: the device is not Gloo's TCP device");
  }
  const Clock::time_point deadline = base::deadline_after(timeout);
  const auto left = [&] {
    return std::max(Millis(1),
                    std::chrono::duration_cast<Millis>(deadline - Clock::now()));
  };
  auto pairs = std::make_shared<MeshPairs>(tcp_device, std::move(shared_store), on_first_use,
                                           rank, size, secret, pair_timeout);
  const std::vector<char>& mine = pairs->address();
  if (on_first_use) {
    // At most one operation a rank: a rank reads a higher peer's address
    // when it first connects to it, and nobody connects to rank 0.
    if (rank != 0) on_first_use->set(std::to_string(rank), store::Bytes(mine.begin(), mine.end()));
    return pairs;
  }

  // Rank 0 gathers the addresses (in windows of gets: a few round trips
  // for a thousand ranks) and publishes the list: 2N + 1 operations.
  std::vector<std::vector<char>> addresses;
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int peer = 1; peer < size; ++peer) keys.push_back(std::to_string(peer));
    const std::vector<store::Bytes> theirs = store.get_all(keys, left());
    addresses.push_back(mine);
    for (int peer = 1; peer < size; ++peer) {
      const store::Bytes& a = theirs[static_cast<size_t>(peer - 1)];
      if (a.size() != kAddressBytes) {
        fail(Status::kPeerLost, "gang_create: rank ", peer, " published a ", a.size(),
             "-byte listening address where rank 0 expects ", kAddressBytes);
      }
      addresses.emplace_back(a.begin(), a.end());
    }
    store.set("all", pack_addresses(addresses));
  } else {
    store.set(std::to_string(rank), store::Bytes(mine.begin(), mine.end()));
    addresses = unpack_addresses(store.get("all", left()), size);
  }
  pairs->set_addresses(std::move(addresses));
  return pairs;
}

}  // namespace gang::backends::gloo_impl
