#include "backends/shm/shm_p2p.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/copy.h"
#include "base/error.h"
#include "core/collective.h"
#include "core/types.h"

namespace gang::backends::shm_impl {

namespace {

using Clock = std::chrono::steady_clock;

int p2p_channel(core::Channel c) { return c == core::Channel::kControl ? 1 : 0; }

void ring(Mailbox& m) {
  m.bell.fetch_add(1, std::memory_order_acq_rel);
  Waiter::wake_all(m.bell);
}

}  // namespace

// One send or receive in flight.
struct P2POp {
  bool is_send;
  int channel;
  int peer;      // kAnySource until a receive from any peer claims a message
  bool any = false;
  int* source = nullptr;  // a receive from any peer: where its sender goes
  uint32_t tag;
  uint8_t* buf;
  uint64_t bytes;
  Clock::time_point deadline;
  // Send: its id once posted (-1: waiting for a free header).
  // Receive: the id of the message it claimed (-1: none yet).
  int64_t id = -1;
  uint64_t done_bytes = 0;
  bool done = false;
  Status error = Status::kOk;
  std::string message;
};

class P2PEngine {
 public:
  P2PEngine(std::shared_ptr<Segment> s, std::shared_ptr<Waiter> w, int rank)
      : seg_(std::move(s)), waiter_(std::move(w)), me_(rank),
        next_id_(static_cast<size_t>(kP2PChannels * seg_->size()), 0) {}

  std::shared_ptr<P2POp> add(const core::Operation& op) {
    auto p = std::make_shared<P2POp>();
    const auto& a = op.args;
    p->is_send = a.kind == core::OpKind::kSend;
    p->channel = p2p_channel(op.channel);
    p->peer = a.root;
    p->any = a.root == core::kAnySource;
    p->source = a.source;
    p->tag = static_cast<uint32_t>(a.tag);
    p->buf = static_cast<uint8_t*>(p->is_send ? const_cast<void*>(a.send) : a.recv);
    p->bytes = a.count * core::dtype_size(a.dtype);
    p->deadline = op.deadline;
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(p);
    progress_locked();
    return p;
  }

  // Advances everything this rank has in flight; true if `p` has ended.
  bool progress(const std::shared_ptr<P2POp>& p) {
    std::lock_guard<std::mutex> lock(mu_);
    progress_locked();
    return p->done;
  }

  // Sleeps until the mailbox of `p` changes or a short while passes.
  void nap(const P2POp& p) {
    int peer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      peer = p.peer;
    }
    if (peer < 0) {  // any peer's mailbox may bring its message: look again soon
      for (int i = 0; i < 64; ++i) sched_yield();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(mu_);
      progress_locked();
      return;
    }
    Mailbox& m = p.is_send ? seg_->mailbox(p.channel, me_, p.peer)
                           : seg_->mailbox(p.channel, p.peer, me_);
    const uint32_t seen = m.bell.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mu_);
      progress_locked();
      if (p.done) return;
    }
    for (int i = 0; i < 64; ++i) {
      if (m.bell.load(std::memory_order_acquire) != seen) return;
      sched_yield();
    }
    // 1 ms at most: other mailboxes may need this rank.
    Waiter::sleep_on(m.bell, seen, std::chrono::milliseconds(1));
  }

  const Waiter& waiter() const { return *waiter_; }

  // The peer of p: kAnySource while a receive from any peer has claimed
  // nothing yet.
  int peer_of(const P2POp& p) {
    std::lock_guard<std::mutex> lock(mu_);
    return p.peer;
  }

 private:
  void progress_locked() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      P2POp& p = **it;
      try {
        if (p.is_send) {
          progress_send(p);
        } else {
          progress_recv(p);
        }
      } catch (const Error& e) {
        p.error = e.status();
        p.message = e.what();
        p.done = true;
      }
      it = p.done ? pending_.erase(it) : it + 1;
    }
  }

  void progress_send(P2POp& p) {
    Mailbox& m = seg_->mailbox(p.channel, me_, p.peer);
    uint64_t& next = next_id_[static_cast<size_t>(p.channel * seg_->size() + p.peer)];
    if (p.id < 0) {
      // Post in id order: only the oldest unposted send of this mailbox.
      for (const auto& other : pending_) {
        if (other.get() == &p) break;
        if (other->is_send && other->channel == p.channel && other->peer == p.peer &&
            other->id < 0) {
          return;
        }
      }
      MsgHeader& h = m.ring[next % kRing];
      if (h.state.load(std::memory_order_acquire) != kFree) return;  // ring full
      h.tag = p.tag;
      h.bytes = p.bytes;
      h.id = next;
      h.state.store(kPosted, std::memory_order_release);
      p.id = static_cast<int64_t>(next++);
      ring(m);
    }
    MsgHeader& h = m.ring[static_cast<uint64_t>(p.id) % kRing];
    const uint32_t state = h.state.load(std::memory_order_acquire);
    if (state == kRejected) {
      const uint64_t wanted = h.expected;
      h.state.store(kFree, std::memory_order_release);
      ring(m);
      fail(Status::kMismatch, "gang_send: rank ", p.peer, " receives ", wanted,
           " bytes with tag ", p.tag, " where rank ", me_, " sends ", p.bytes);
    }
    if (state == kFree) {  // the receiver took it all
      p.done = true;
      return;
    }
    if (m.claim.load(std::memory_order_acquire) != static_cast<uint64_t>(p.id) + 1) return;
    // Stream what fits.
    const uint64_t filled = m.filled.load(std::memory_order_relaxed);
    const uint64_t drained = m.drained.load(std::memory_order_acquire);
    uint64_t room = kMailBytes - (filled - drained);
    uint64_t at = filled;
    while (room > 0 && at < p.bytes) {
      const uint64_t pos = at % kMailBytes;
      const uint64_t n = std::min({room, p.bytes - at, kMailBytes - pos});
      base::copy_bytes(m.data + pos, p.buf + at, n);
      at += n;
      room -= n;
    }
    if (at != filled) {
      m.filled.store(at, std::memory_order_release);
      ring(m);
    }
    // The send's buffer is free once every byte is in the mailbox.
    if (at == p.bytes) p.done = true;
  }

  // Whether an earlier receive than p (in pending_, on p's channel) takes
  // precedence for a message from `peer` with p's tag: one of that peer's
  // already streaming, or one that could match it and was posted first (a
  // receive from that peer with the tag, or from any peer with the tag).
  bool earlier_claims(const P2POp& p, int peer) const {
    for (const auto& other : pending_) {
      if (other.get() == &p) break;
      if (other->is_send || other->channel != p.channel) continue;
      if (other->peer == peer && (other->id >= 0 || other->tag == p.tag)) return true;
      if (other->peer < 0 && other->tag == p.tag) return true;
    }
    return false;
  }

  // The oldest message posted in m with tag, or null.
  static MsgHeader* oldest(Mailbox& m, uint32_t tag) {
    MsgHeader* best = nullptr;
    for (MsgHeader& h : m.ring) {
      if (h.state.load(std::memory_order_acquire) == kPosted && h.tag == tag &&
          (best == nullptr || h.id < best->id)) {
        best = &h;
      }
    }
    return best;
  }

  // p claims the message h of peer's mailbox m: it streams next.
  void claim(P2POp& p, int peer, Mailbox& m, MsgHeader& h) {
    if (h.bytes != p.bytes) {
      h.expected = p.bytes;
      const uint64_t sent = h.bytes;
      h.state.store(kRejected, std::memory_order_release);
      ring(m);
      fail(Status::kMismatch, p.any ? "gang_recv_any" : "gang_recv", ": rank ", peer,
           " sends ", sent, " bytes with tag ", p.tag, " where rank ", me_, " receives ",
           p.bytes);
    }
    h.state.store(kClaimed, std::memory_order_release);
    m.filled.store(0, std::memory_order_relaxed);
    m.drained.store(0, std::memory_order_relaxed);
    p.peer = peer;
    p.id = static_cast<int64_t>(h.id);
    m.claim.store(h.id + 1, std::memory_order_release);
    ring(m);
  }

  // A receive from any peer claims the oldest message with its tag of the
  // first peer (from a rotating start) whose messages it may take now.
  bool claim_any(P2POp& p) {
    const int size = seg_->size();
    for (int k = 0; k < size; ++k) {
      const int peer = (next_any_ + k) % size;
      if (peer == me_) continue;
      Mailbox& m = seg_->mailbox(p.channel, peer, me_);
      if (m.claim.load(std::memory_order_acquire) != 0) continue;
      if (earlier_claims(p, peer)) continue;
      MsgHeader* h = oldest(m, p.tag);
      if (h == nullptr) continue;
      next_any_ = (peer + 1) % size;
      claim(p, peer, m, *h);
      return true;
    }
    return false;
  }

  void progress_recv(P2POp& p) {
    if (p.id < 0) {
      if (p.any) {
        // An earlier receive from any peer with this tag picks first.
        for (const auto& other : pending_) {
          if (other.get() == &p) break;
          if (!other->is_send && other->channel == p.channel && other->peer < 0 &&
              other->tag == p.tag) {
            return;
          }
        }
        if (!claim_any(p)) return;
      } else {
        // Only one message streams per mailbox; and earlier receives that
        // could take it claim first.
        Mailbox& m = seg_->mailbox(p.channel, p.peer, me_);
        if (m.claim.load(std::memory_order_acquire) != 0) return;
        if (earlier_claims(p, p.peer)) return;
        MsgHeader* h = oldest(m, p.tag);
        if (h == nullptr) return;
        claim(p, p.peer, m, *h);
      }
    }
    Mailbox& m = seg_->mailbox(p.channel, p.peer, me_);
    const uint64_t filled = m.filled.load(std::memory_order_acquire);
    uint64_t at = p.done_bytes;
    while (at < filled) {
      const uint64_t pos = at % kMailBytes;
      const uint64_t n = std::min(filled - at, kMailBytes - pos);
      base::copy_bytes(p.buf + at, m.data + pos, n);
      at += n;
    }
    if (at != p.done_bytes) {
      p.done_bytes = at;
      m.drained.store(at, std::memory_order_release);
      ring(m);
    }
    if (at == p.bytes) {
      m.ring[static_cast<uint64_t>(p.id) % kRing].state.store(kFree, std::memory_order_release);
      m.claim.store(0, std::memory_order_release);
      ring(m);
      if (p.source != nullptr) *p.source = p.peer;
      p.done = true;
    }
  }

  std::shared_ptr<Segment> seg_;
  std::shared_ptr<Waiter> waiter_;
  int me_;
  std::mutex mu_;
  std::deque<std::shared_ptr<P2POp>> pending_;
  std::vector<uint64_t> next_id_;  // per channel and peer: the next send's id
  int next_any_ = 0;               // where a receive from any peer looks first
};

namespace {

class P2PWork final : public core::BackendWork {
 public:
  P2PWork(std::shared_ptr<P2PEngine> e, std::shared_ptr<P2POp> p)
      : engine_(std::move(e)), op_(std::move(p)) {}

  bool test() override { return finished(engine_->progress(op_)); }

  bool wait(Clock::time_point until) override {
    auto next_look = Clock::now() + std::chrono::milliseconds(100);
    for (;;) {
      if (finished(engine_->progress(op_))) return true;
      engine_->waiter().check();
      const auto now = Clock::now();
      if (now >= next_look) {
        try {
          const int peer = engine_->peer_of(*op_);
          if (peer >= 0) engine_->waiter().check_alive(peer);
        } catch (const Error&) {
          // A peer may finish its side and exit between the look above
          // and this one: what it left decides.
          if (finished(engine_->progress(op_))) return true;
          throw;
        }
        next_look = now + std::chrono::milliseconds(100);
      }
      if (now >= op_->deadline) {
        const int peer = engine_->peer_of(*op_);
        if (peer < 0) {
          throw core::timed_out(text("any rank (none sent a message with tag ", op_->tag,
                                     " before the deadline)"));
        }
        throw core::timed_out(text("rank ", Rank{peer}, " (it did not ",
                                   op_->is_send ? "receive" : "send", " before the deadline)"));
      }
      if (now >= until) return false;
      engine_->nap(*op_);
    }
  }

 private:
  bool finished(bool done) const {
    if (done && op_->error != Status::kOk) throw Error(op_->error, op_->message);
    return done;
  }

  std::shared_ptr<P2PEngine> engine_;
  std::shared_ptr<P2POp> op_;
};

}  // namespace

core::BackendWorkPtr post_p2p(const std::shared_ptr<P2PEngine>& engine,
                              const core::Operation& op) {
  auto p = engine->add(op);
  if (p->done && p->error != Status::kOk) throw Error(p->error, p->message);
  return std::make_unique<P2PWork>(engine, std::move(p));
}

std::shared_ptr<P2PEngine> make_p2p_engine(std::shared_ptr<Segment> segment,
                                           std::shared_ptr<Waiter> waiter,
                                           int rank) {
  return std::make_shared<P2PEngine>(std::move(segment), std::move(waiter), rank);
}

}  // namespace gang::backends::shm_impl
