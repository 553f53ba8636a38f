#include "backends/gloo/gloo_frames.h"

#include <gloo/common/error.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>

#include "backends/gloo/gloo_pairs.h"
#include "backends/gloo/gloo_view.h"
#include "base/descriptors.h"
#include "base/error.h"
#include "core/collective.h"

namespace gang::backends::gloo_impl {

namespace {

using core::OpKind;
using Millis = std::chrono::milliseconds;

constexpr uint32_t kFrameMagic = 0x6d726667;  // "gfrm"
// Frames travel on their own slots, apart from every payload.
constexpr uint8_t kFramePrefix = 0x44;
// How long a rank that found a mismatch gives its frames to leave.
constexpr Millis kFrameFlush{250};

}  // namespace

Frame make_frame(const core::Operation& op, uint64_t to_you,
                 uint64_t from_you) {
  Frame f;
  std::memset(&f, 0, sizeof f);
  f.magic = kFrameMagic;
  f.channel = static_cast<uint8_t>(op.channel);
  f.sig = core::OpSignature::of(op.args);
  f.to_you = to_you;
  f.from_you = from_you;
  return f;
}

void check_frame(const Frame& mine, int me, const Frame& theirs, int peer) {
  bool same = theirs.magic == kFrameMagic && theirs.channel == mine.channel &&
              theirs.sig.same(mine.sig);
  // all_to_allv: what each of the pair sends is what the other expects.
  if (same && static_cast<OpKind>(mine.sig.kind) == OpKind::kAllToAllV) {
    same = theirs.to_you == mine.from_you && theirs.from_you == mine.to_you;
  }
  if (same) return;
  core::OpSignature seen = theirs.sig;
  if (theirs.magic != kFrameMagic) seen.kind = 0xff;  // describes itself as no operation
  if (static_cast<OpKind>(mine.sig.kind) == OpKind::kAllToAllV && seen.same(mine.sig)) {
    fail(Status::kMismatch, core::mismatch(me, mine.sig, peer, seen), ": rank ", Rank{me},
         " sends ", mine.to_you, " bytes to rank ", Rank{peer}, " and expects ", mine.from_you,
         ", rank ", Rank{peer}, " sends ", theirs.to_you, " and expects ", theirs.from_you);
  }
  throw core::mismatch(me, mine.sig, peer, seen);
}

void Waits::add(::gloo::transport::UnboundBuffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert(b);
  if (aborted_) {
    b->abortWaitSend();
    b->abortWaitRecv();
  }
}

void Waits::remove(::gloo::transport::UnboundBuffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(b);
}

void Waits::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  for (auto* b : live_) {
    b->abortWaitSend();
    b->abortWaitRecv();
  }
}

bool Waits::aborted() {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

WaitableBuffer::WaitableBuffer(const std::shared_ptr<::gloo::Context>& ctx,
                               std::shared_ptr<Waits> waits, const void* data,
                               size_t n)
    : waits_(std::move(waits)) {
  // Gloo keeps raw pointers; an empty buffer still needs one.
  static uint8_t empty;
  void* p = data ? const_cast<void*>(data) : &empty;
  buffer_ = ctx->createUnboundBuffer(p, n);
  waits_->add(buffer_.get());
}

WaitableBuffer::~WaitableBuffer() { waits_->remove(buffer_.get()); }

Transfers::~Transfers() {
  // Transfers posted and never completed (the operation failed): their
  // connections close before their buffers go, so that nothing arrives in
  // memory the caller has got back.
  if (pending_.empty()) return;
  std::vector<int> peers;
  for (const Pending& p : pending_) peers.push_back(p.peer);
  if (View* view = as_view(*ctx_)) view->fence(peers);
}

::gloo::transport::UnboundBuffer* Transfers::buffer(const void* data,
                                                    size_t n) {
  buffers_.push_back(std::make_unique<WaitableBuffer>(ctx_, waits_, data, n));
  return buffers_.back()->get();
}

void Transfers::send(::gloo::transport::UnboundBuffer* b, int peer,
                     uint64_t slot, size_t offset, size_t n) {
  if (n == 0) return;
  b->send(peer, slot, offset, n);
  pending_.push_back({b, true, peer});
}

void Transfers::recv(::gloo::transport::UnboundBuffer* b, int peer,
                     uint64_t slot, size_t offset, size_t n) {
  if (n == 0) return;
  b->recv(peer, slot, offset, n);
  pending_.push_back({b, false, peer});
}

Text rank_list(const std::vector<int>& ranks) {
  return text(ranks.size() == 1 ? "rank " : "ranks ", Ranks{ranks});
}

Millis Transfers::left(const std::vector<int>& awaited) const {
  const auto left =
      std::chrono::duration_cast<Millis>(deadline_ - core::Clock::now());
  if (left.count() <= 0) {
    throw core::timed_out(text(rank_list(awaited), " (the deadline passed before this wait)"));
  }
  return left;
}

void Transfers::rethrow(const ::gloo::Exception& e,
                        const std::vector<int>& awaited) const {
  if (waits_->aborted()) fail(Status::kAborted, "the gang was aborted");
  const std::string what = e.what();
  // Out of descriptors: this process's limit, not a lost or late peer.
  if (std::string why; base::out_of_descriptors(&why)) fail(Status::kSystem, why, ": ", what);
  // Gloo reports a timeout and a broken connection with the same exception
  // type; the deadline tells them apart.
  if (base::at_deadline(deadline_) || dynamic_cast<const ConnectTimeout*>(&e) != nullptr) {
    throw core::timed_out(text(rank_list(awaited), " (", awaited.size() == 1 ? "it has" : "they have",
                               " not reached this operation, or ", awaited.size() == 1 ? "is" : "are",
                               " stuck in an earlier one)"));
  }
  throw core::peers_gone(awaited, text("lost the connection: ", what));
}

void Transfers::wait_for(const Pending& p) const {
  bool ok = false;
  try {
    ok = p.is_send ? p.buffer->waitSend(left({p.peer}))
                   : p.buffer->waitRecv(left({p.peer}));
  } catch (const ::gloo::Exception& e) {
    rethrow(e, {p.peer});
  }
  if (!ok) fail(Status::kAborted, "the transfer was aborted");
}

void Transfers::wait() {
  for (const Pending& p : pending_) wait_for(p);
  pending_.clear();
}

void Transfers::wait_one(::gloo::transport::UnboundBuffer* b) {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->buffer != b) continue;
    const Pending p = *it;
    pending_.erase(it);
    wait_for(p);
    return;
  }
}

void Transfers::flush_sends(Millis most) noexcept {
  const auto until = std::min(deadline_, core::Clock::now() + most);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!it->is_send) {
      ++it;
      continue;
    }
    const auto left = std::chrono::duration_cast<Millis>(until - core::Clock::now());
    if (left.count() <= 0) return;
    try {
      // A view has no pairs of its own, so a wait that times out here
      // closes nothing (gloo_view.h); the destructor fences what is left.
      if (!it->buffer->waitSend(left)) return;
    } catch (...) {
      return;
    }
    it = pending_.erase(it);
  }
}

namespace {

// Sends frames_out[i] to to[i] and receives frames_in[j] from from[j];
// each received frame is checked against mine(j) the moment its own
// receive completes, in the order of `from`.
template <typename Mine>
void move_frames(const std::shared_ptr<::gloo::Context>& ctx, const std::shared_ptr<Waits>& waits,
                 core::Clock::time_point deadline, uint32_t tag, const std::vector<int>& to,
                 const std::vector<Frame>& frames_out, const std::vector<int>& from,
                 std::vector<Frame>& frames_in, uint32_t step, Mine mine) {
  if (to.empty() && from.empty()) return;
  const uint64_t frame_slot = slot(kFramePrefix, tag, step);
  constexpr size_t F = sizeof(Frame);
  Transfers t(ctx, waits, deadline);
  // A buffer per frame received: each is checked the moment its own receive
  // completes (Gloo says only how many receives of a buffer completed, not
  // which), so a peer in another operation fails this one before the wait
  // for a later peer, which may never send. Whichever rank finds a mismatch
  // fails and closes its connections, which ends its peers' waits: those
  // its own transfers still wait on, and the one with the rank whose frame
  // disagreed, which runs another operation and may wait on this rank in
  // ways this rank cannot see (a root sending it data it never posted a
  // receive for). It first lets its own frames go (Gloo sends one only once
  // the peer has posted its receive): a peer in the same operation then
  // finds the mismatch itself rather than a closed connection.
  std::vector<::gloo::transport::UnboundBuffer*> in(from.size());
  for (size_t j = 0; j < from.size(); ++j) {
    in[j] = t.buffer(&frames_in[j], F);
    t.recv(in[j], from[j], frame_slot, 0, F);
  }
  if (!to.empty()) {
    auto* out = t.buffer(frames_out.data(), frames_out.size() * F);
    for (size_t i = 0; i < to.size(); ++i) t.send(out, to[i], frame_slot, i * F, F);
  }
  for (size_t j = 0; j < from.size(); ++j) {
    t.wait_one(in[j]);
    try {
      check_frame(mine(j), ctx->rank, frames_in[j], from[j]);
    } catch (...) {
      t.flush_sends(kFrameFlush);
      if (View* view = as_view(*ctx)) view->fence({from[j]});
      throw;
    }
  }
  t.wait();
}

}  // namespace

void exchange_frames(const std::shared_ptr<::gloo::Context>& ctx,
                     const std::shared_ptr<Waits>& waits,
                     core::Clock::time_point deadline, uint32_t tag,
                     const std::vector<int>& partners,
                     const std::vector<Frame>& frames_out,
                     std::vector<Frame>& frames_in, uint32_t step) {
  // Frames are awaited in rank order.
  move_frames(ctx, waits, deadline, tag, partners, frames_out, partners, frames_in, step,
              [&](size_t j) -> const Frame& { return frames_out[j]; });
}

void route_frames(const std::shared_ptr<::gloo::Context>& ctx,
                  const std::shared_ptr<Waits>& waits, core::Clock::time_point deadline,
                  uint32_t tag, const std::vector<int>& to,
                  const std::vector<Frame>& frames_out, const std::vector<int>& from,
                  std::vector<Frame>& frames_in, const Frame& mine, uint32_t step) {
  move_frames(ctx, waits, deadline, tag, to, frames_out, from, frames_in, step,
              [&](size_t) -> const Frame& { return mine; });
}

}  // namespace gang::backends::gloo_impl
