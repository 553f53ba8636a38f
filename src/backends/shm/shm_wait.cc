#include "backends/shm/shm_wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "base/deadline.h"
#include "base/error.h"
#include "base/process.h"
#include "core/collective.h"
#include "core/env.h"
#include "core/log.h"

namespace gang::backends::shm_impl {

namespace {

using Clock = std::chrono::steady_clock;

// Spinning costs nothing to a rank whose peers have cores of their own, but
// a whole spin to one whose peer waits for the same core (the scheduler may
// put them there): so spin briefly (and not at all when the gang has more
// ranks than the host has cores), then yield, which hands a shared core
// over, for a while; then sleep on the futex. A sleeper wakes on its own
// only to look at what nobody wakes it for (a peer's death, its own abort,
// a failure posted on another word, the deadline): every kNap at first,
// every kLongNap once the wait is long. Where ranks outnumber cores,
// waiters that woke every 20 ms for good took the cores from the ranks
// they waited for: 1,792 ranks waiting for their hosts' leaders through
// the leaders' gloo creation (bench/creation_threads 2048 256 0 auto,
// docs/benchmarks.md) made it take up to 48 s instead of about 2.
constexpr auto kSpinFor = std::chrono::microseconds(4);
constexpr auto kYieldFor = std::chrono::microseconds(500);
constexpr auto kNap = std::chrono::milliseconds(20);
constexpr auto kLongNap = std::chrono::milliseconds(100);
constexpr auto kNapLongAfter = std::chrono::seconds(1);
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(100);

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void Waiter::sleep_on(const std::atomic<uint32_t>& word, uint32_t seen,
                      std::chrono::nanoseconds for_at_most) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(for_at_most.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(for_at_most.count() % 1000000000);
  // Shared (not private) futex: the word lives in a mapping of several
  // processes.
  ::syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), FUTEX_WAIT,
            seen, &ts, nullptr, 0);
}

void Waiter::wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX,
            nullptr, nullptr, 0);
}

namespace {

// Ends each text of a message in the failure record.
constexpr char kTextEnd = '\x1f';

// `t` into the record, cut to fit: as many ranks and text as there is room for.
void put(const Text& t, Header& h) noexcept {
  size_t at = 0;
  uint32_t ranks = 0;
  for (size_t i = 0; i < t.texts.size(); ++i) {
    const std::string& part = t.texts[i];
    const size_t room = sizeof h.failed_why - 1 - at;
    if (room == 0) break;
    const size_t n = std::min(part.size(), room - 1);
    std::memcpy(h.failed_why + at, part.data(), n);
    at += n;
    h.failed_why[at++] = kTextEnd;
    if (i < t.ranks.size() && ranks < std::size(h.failed_ranks)) {
      h.failed_ranks[ranks++] = t.ranks[i];
    } else {
      break;
    }
  }
  h.failed_why[at] = '\0';
  h.failed_nranks = ranks;
}

// The record's message: its texts with the ranks between them.
Text taken(const Header& h) {
  Text t;
  const char* p = h.failed_why;
  const char* end = h.failed_why + strnlen(h.failed_why, sizeof h.failed_why);
  for (uint32_t i = 0; p < end; ++i) {
    const char* stop = std::find(p, end, kTextEnd);
    t.add(std::string(p, stop));
    p = stop == end ? end : stop + 1;
    if (i < h.failed_nranks && p < end) t.add(Rank{h.failed_ranks[i]});
  }
  return t;
}

}  // namespace

void Waiter::fail_gang(const Error& why) const noexcept {
  Header& h = segment_.header();
  uint32_t none = 0;
  if (h.failed_claim.compare_exchange_strong(none, 1, std::memory_order_acq_rel)) {
    h.failed_rank = rank_;
    h.failed_status = static_cast<int32_t>(why.status());
    put(why.message(), h);
    h.failed.store(1, std::memory_order_release);
  }
  for (int c = 0; c < kChannels; ++c) wake_all(segment_.barrier(c).generation);
}

void Waiter::check_alive(int r) const {
  const int32_t pid = segment_.rank_block(r).pid.load(std::memory_order_acquire);
  if (base::process_ended(pid)) {
    throw core::peers_gone({r}, text("pid ", pid, " ended"));
  }
}

void Waiter::check_peers() const {
  // A peer in this very process (ranks as threads) is alive while we are.
  const int32_t self = ::getpid();
  for (int r = 0; r < segment_.size(); ++r) {
    if (r == rank_) continue;
    if (segment_.rank_block(r).pid.load(std::memory_order_acquire) != self) check_alive(r);
  }
}

void Waiter::check() const {
  if (aborted_.load(std::memory_order_acquire)) {
    fail(Status::kAborted, "the gang was aborted");
  }
  const Header& h = segment_.header();
  if (h.failed.load(std::memory_order_acquire) != 0) {
    const auto status = static_cast<Status>(h.failed_status);
    // What the rank that failed saw, in its words: a mismatch or a lost
    // peer reads the same here as there.
    if (status == Status::kMismatch || status == Status::kPeerLost) fail(status, taken(h));
    fail(Status::kPeerLost, "rank ", Rank{h.failed_rank}, " failed (", taken(h),
         "), so this operation cannot complete");
  }
}

Waiter::Waiter(Segment& segment, int rank, std::string gang)
    : segment_(segment), rank_(rank), gang_(std::move(gang)),
      warn_every_(core::env::wait_warn_interval()) {}

bool Waiter::spin_until(const std::atomic<uint64_t>& word, uint64_t value) const {
  if (word.load(std::memory_order_acquire) == value) return true;
  if (segment_.more_ranks_than_cores()) return false;
  // The clock is read only once the word was not there at once.
  Clock::time_point stop{};
  for (int i = 1;; ++i) {
    relax();
    if (word.load(std::memory_order_acquire) == value) return true;
    if ((i & 63) == 0) {
      const auto now = Clock::now();
      if (i == 64) {
        stop = now + kSpinFor;
      } else if (now >= stop) {
        return false;
      }
    }
  }
}

void Waiter::wait_change(const std::atomic<uint32_t>& word, uint32_t seen,
                         Clock::time_point deadline,
                         std::atomic<uint32_t>& sleepers,
                         const Watch* watch) const {
  if (!segment_.more_ranks_than_cores()) {
    const auto stop_spinning = Clock::now() + kSpinFor;
    for (int i = 0;; ++i) {
      if (word.load(std::memory_order_acquire) != seen) return;
      if ((i & 63) == 63 && Clock::now() >= stop_spinning) break;
      relax();
    }
  }
  const auto stop_yielding = std::min(deadline, Clock::now() + kYieldFor);
  for (int i = 0;; ++i) {
    if (word.load(std::memory_order_acquire) != seen) return;
    if ((i & 15) == 15 && Clock::now() >= stop_yielding) break;
    sched_yield();
  }
  const auto sleeping_since = Clock::now();
  auto next_peer_check = sleeping_since;
  auto next_warning = sleeping_since + warn_every_;
  for (;;) {
    if (word.load(std::memory_order_acquire) != seen) return;
    if (aborted_.load(std::memory_order_acquire)) {
      fail(Status::kAborted, "the gang was aborted");
    }
    const auto now = Clock::now();
    // A peer that gave up at the same deadline (a rank all of them wait
    // for never came) is a timeout here too, as on Gloo.
    if (base::at_deadline(deadline, now)) {
      if (now >= deadline || segment_.header().failed.load(std::memory_order_acquire)) {
        if (watch == nullptr) {
          throw core::timed_out(text("the other ranks"));
        }
        throw core::timed_out(watch->missing());
      }
    }
    try {
      check();
      if (watch != nullptr) watch->check_peers();
      if (now >= next_peer_check) {
        check_peers();
        next_peer_check = now + kPeerCheckEvery;
      }
    } catch (const Error&) {
      // The last peer in may change the word and exit between the look at
      // the top and these checks: a change it made before it went counts.
      if (word.load(std::memory_order_acquire) != seen) return;
      throw;
    }
    if (watch != nullptr && warn_every_.count() > 0 && now >= next_warning) {
      GANG_LOG(kWarn, "gang \"", gang_, "\" rank ", rank_, " has waited ",
               std::chrono::duration_cast<std::chrono::seconds>(now - sleeping_since).count(),
               " s in ", watch->operation(), " for ", watch->missing());
      next_warning = now + warn_every_;
    }
    const auto nap = std::min<Clock::duration>(
        deadline - now, now - sleeping_since < kNapLongAfter ? kNap : kLongNap);
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    sleep_on(word, seen, std::chrono::duration_cast<std::chrono::nanoseconds>(nap));
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace gang::backends::shm_impl
