#include "backends/gloo/gloo_pairs.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/common/error.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>
#include <gloo/transport/tcp/pair.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

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

// Connections a listening pair holds while their proofs arrive.
constexpr size_t kCandidates = 8;

std::string proof(const std::string& secret, int connector, int listener,
                  const std::vector<char>& listener_address) {
  std::string message = str_cat("gang gloo pair v1 ", connector, " ", listener, " ");
  message.append(listener_address.begin(), listener_address.end());
  const base::Digest d = base::hmac_sha256(secret, message);
  return std::string(d.begin(), d.end());
}

class AuthPair;

// One accepted connection whose proof has not arrived yet. Its handler
// stays valid as long as the pair: the event loop may still hold an event
// for a slot that was just emptied (or refilled) in the same tick.
struct Candidate final : tcp::Handler {
  AuthPair* pair = nullptr;
  int fd = -1;
  size_t got = 0;
  char proof[32] = {};
  Clock::time_point since;
  void handleEvents(int events) override;
};

class AuthPair final : public tcp::Pair {
 public:
  AuthPair(tcp::Context* context, tcp::Device* device, int peer, Millis timeout,
           const std::string& secret)
      : tcp::Pair(context, device, peer, timeout), secret_(secret) {
    std::unique_lock<std::mutex> lock(m_);
    for (Candidate& c : candidates_) c.pair = this;
    check_layout();
    // The listening socket must never block the event loop.
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
    expected_ = proof(secret_, peer, context->rank, self_.bytes());
    // The loop thread learns of this pair through epoll, which
    // ThreadSanitizer cannot see; its first look at connected_ acquires
    // this store, and with it everything constructed above.
    connected_.store(false, std::memory_order_release);
  }

  // Closes here, not in Gloo's destructor: once this one returns, the event
  // loop would still call handleEvents of a pair whose candidates are gone.
  // Closing unregisters the connection and waits for the loop's next tick,
  // so no call is in flight or can come when the members go.
  ~AuthPair() override {
    std::lock_guard<std::mutex> lock(m_);
    drop_all();
    if (state_ != CLOSED) changeState(CLOSED);
  }

  void connect(const std::vector<char>& bytes) override {
    {
      std::lock_guard<std::mutex> lock(m_);
      listener_address_ = bytes;
    }
    tcp::Pair::connect(bytes);
  }

  void handleEvents(int events) override {
    if (connected_.load(std::memory_order_acquire)) {
      tcp::Pair::handleEvents(events);
      return;
    }
    // As Gloo's own handler: never wait for the lock on the loop thread (a
    // thread holding it may be waiting for the loop).
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    if (!lock) return;
    try {
      if (state_ == LISTENING) {
        accept_candidate();
      } else if (state_ == CONNECTING) {
        finish_connecting();
      }
    } catch (const std::exception& e) {
      if (ex_ == nullptr) signalException(e.what());
    }
  }

  void on_candidate(Candidate& c) {
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    if (!lock || c.fd < 0 || state_ != LISTENING) return;
    try {
      while (c.got < sizeof c.proof) {
        const ssize_t n = ::recv(c.fd, c.proof + c.got, sizeof c.proof - c.got, 0);
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
      if (!base::equal_in_constant_time(std::string(c.proof, sizeof c.proof),
                                        expected_)) {
        refuse(c, "did not prove the gang's secret");
        return;
      }
      adopt(c);
    } catch (const std::exception& e) {
      if (ex_ == nullptr) signalException(e.what());
    }
  }

 protected:
  void changeState(state next) noexcept override {
    // Leaving LISTENING (connecting out, connected, closed) ends every
    // candidate's chance.
    if (next != LISTENING) drop_all();
    tcp::Pair::changeState(next);
  }

 private:
  // This class reads Gloo's Pair through headers that must describe the
  // installed library (see compat/gloo/common/memory.h): a fresh pair is
  // LISTENING on a socket bound to the address it reports. Anything else
  // means the headers and the library disagree; stop before using them.
  void check_layout() const {
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    const sockaddr_storage& reported = self_.getSockaddr();
    const bool same =
        state_ == LISTENING && fd_ >= 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len) == 0 &&
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

  // Lock held, loop thread, state LISTENING.
  void accept_candidate() {
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
          errno == ECONNABORTED) {
        return;
      }
      signalException(str_cat("accept: ", base::errno_text(errno)));
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

  // Lock held, loop thread: `c` proved the secret; it becomes the pair's
  // connection and the listening socket closes.
  void adopt(Candidate& c) {
    device_->unregisterDescriptor(c.fd, &c);
    device_->unregisterDescriptor(fd_, this);
    ::close(fd_);
    fd_ = c.fd;
    c.fd = -1;
    drop_all();
    connected_.store(true, std::memory_order_release);
    handleConnected();
  }

  // Lock held, loop thread, state CONNECTING: the connection completed or
  // failed; on success the proof goes first.
  void finish_connecting() {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      signalException(str_cat("connect ", peer_.str(), ": ", base::errno_text(err)));
      return;
    }
    const std::string p = proof(secret_, context_->rank, rank_, listener_address_);
    const ssize_t n = ::send(fd_, p.data(), p.size(), MSG_NOSIGNAL);
    if (n != static_cast<ssize_t>(p.size())) {
      signalException(str_cat("connect ", peer_.str(),
                              ": could not send the proof of the gang's secret: ",
                              n < 0 ? base::errno_text(errno) : "short write"));
      return;
    }
    connected_.store(true, std::memory_order_release);
    handleConnected();
  }

  void refuse(Candidate& c, const char* why) noexcept {
    try {
      const tcp::Address from = tcp::Address::fromPeerName(c.fd);
      GANG_LOG(kWarn, "gloo: rank ", context_->rank, " closed a connection from ",
               from.str(), " to its pair with rank ", rank_, " that ", why);
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

  const std::string secret_;
  std::string expected_;                 // the proof this side listens for
  std::vector<char> listener_address_;   // the peer's, when this side connects
  std::array<Candidate, kCandidates> candidates_;
  std::atomic<bool> connected_{false};
};

void Candidate::handleEvents(int) { pair->on_candidate(*this); }

class AuthContext final : public tcp::Context {
 public:
  AuthContext(std::shared_ptr<tcp::Device> device, int rank, int size,
              std::string secret)
      : tcp::Context(std::move(device), rank, size), secret_(std::move(secret)) {}

  std::unique_ptr<::gloo::transport::Pair>& createPair(int peer) override {
    pairs_[static_cast<size_t>(peer)].reset(
        new AuthPair(this, device_.get(), peer, getTimeout(), secret_));
    return pairs_[static_cast<size_t>(peer)];
  }

 private:
  const std::string secret_;
};

// A Gloo context over pairs made elsewhere.
class MeshContext final : public ::gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size,
              std::shared_ptr<::gloo::transport::Device> device,
              std::shared_ptr<::gloo::transport::Context> pairs)
      : ::gloo::rendezvous::Context(rank, size) {
    device_ = std::move(device);
    transportContext_ = std::move(pairs);
  }
};

}  // namespace

std::shared_ptr<::gloo::rendezvous::Context> connect_mesh(
    store::Store& store, std::shared_ptr<::gloo::transport::Device> device,
    int rank, int size, const std::string& secret, Millis timeout) {
  auto tcp_device = std::dynamic_pointer_cast<tcp::Device>(device);
  if (!tcp_device) {
    fail(Status::kInternal, "gloo: the device is not Gloo's TCP device");
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  auto pairs = std::make_shared<AuthContext>(tcp_device, rank, size, secret);
  pairs->setTimeout(timeout);

  store::Bytes mine;
  size_t entry = 0;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> address = pairs->createPair(peer)->address().bytes();
    entry = address.size();
    mine.insert(mine.end(), address.begin(), address.end());
  }
  store.set(std::to_string(rank), mine);

  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const Millis left = std::max(
        Millis(1), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    const store::Bytes theirs = store.get(std::to_string(peer), left);
    if (theirs.size() != entry * static_cast<size_t>(size - 1)) {
      fail(Status::kPeerLost, "gang_create: rank ", peer, " published ",
           theirs.size(), " bytes of pair addresses where rank ", rank,
           " expects ", entry * static_cast<size_t>(size - 1));
    }
    // Rank `peer` lists its pairs in rank order, skipping itself.
    const size_t at = entry * static_cast<size_t>(rank < peer ? rank : rank - 1);
    pairs->getPair(peer)->connect(
        std::vector<char>(theirs.begin() + static_cast<ptrdiff_t>(at),
                          theirs.begin() + static_cast<ptrdiff_t>(at + entry)));
  }
  return std::make_shared<MeshContext>(rank, size, std::move(device),
                                       std::move(pairs));
}

}  // namespace gang::backends::gloo_impl
