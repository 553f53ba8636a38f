// One shm collective in progress on one channel, and how its ranks agree
// on it. Each rank publishes what it is running (its core::OpSignature, its
// number, the broadcasts that did not meet before it) in its own
// descriptor; the first meeting of an operation, and every wait, compares
// the peers' with its own, so ranks in different operations fail with
// kMismatch naming both (core::mismatch) instead of exchanging data. The
// algorithms (shm_collectives.cc) see only the meetings and the slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/shm/shm_collectives.h"
#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_wait.h"
#include "base/copy.h"
#include "base/error.h"
#include "core/backend.h"
#include "core/collective.h"

namespace gang::backends::shm_impl {

// Gathers of this much a rank and more, below kSingleCopyBelow in all,
// copy once, straight from the owner's buffer (process_vm_readv), when the
// segment allows it and every rank has a core of its own (at every size
// from kSingleCopyBytes with GANG_SHM_SINGLE_COPY=always): two meetings and
// one copy instead of a copy in, a meeting and a copy out. From 1 MiB on
// the copies in and out win (they stay in cache and the kernel's copy pins
// every page), and with more ranks than cores they win from 128 KiB.
// Broadcasts always copy in and out: the root fills the next chunk while
// the others empty the last, which beat the single copy at every size.
// (The measurements: docs/benchmarks.md.)
constexpr size_t kSingleCopyBytes = 32 << 10;
constexpr size_t kSingleCopyBelow = 1 << 20;

// Copies a peer's description of `turn` into *out; false while the peer has
// not published it (or has moved on past it).
bool read_desc(const OpDesc& d, uint64_t turn, OpDesc* out);

// Sets sig to value and wakes the ranks that sleep on it.
void signal(Signal& sig, uint32_t value);

class Run final : public Watch {
 public:
  Run(Segment& s, const Waiter& w, int rank, int channel, ChannelState& state,
      const core::Operation& op)
      : seg_(s), waiter_(w), me_(rank), n_(s.size()), ch_(channel),
        state_(state), turn_(state.turns++), op_(op), a_(op.args),
        es_(core::dtype_size(op.args.dtype)),
        chunk_(s.slot_bytes(channel) / 2 / es_ * es_), inline_(goes_inline(op.args, n_)) {
    OpDesc& d = own().desc[turn_ % kDescs];
    d.turn.store(kUnpublished, std::memory_order_relaxed);
    d.seq = op.seq;
    d.sig = core::OpSignature::of(a_);
    // Where peers read this rank's buffer, for a single copy.
    const bool gathers = a_.kind == core::OpKind::kAllGather || a_.kind == core::OpKind::kAllGatherV ||
                         a_.kind == core::OpKind::kGather;
    d.addr = gathers ? reinterpret_cast<uintptr_t>(a_.send) : 0;
    d.history = state.history;
    d.check = check_of(d);
    if (inline_ && a_.count != 0) base::copy_bytes(d.payload, a_.send, inline_bytes(a_, n_));
    d.turn.store(turn_, std::memory_order_release);
    if (inline_) signal(own().joined, static_cast<uint32_t>(turn_ + 1));
  }

  // The bytes of a rank's input when `a` is an operation that can go in
  // the descriptions on n ranks (an all-reduce, reduce, all-gather, gather
  // or reduce-scatter, and a barrier's nothing), else more than
  // kInlineBytes. From the signature alone: the same on every rank of the
  // same operation.
  static size_t inline_bytes(const core::CollectiveArgs& a, int n) {
    constexpr size_t kNo = kInlineBytes + 1;
    if (n == 1) return kNo;
    if (a.kind == core::OpKind::kBarrier) return 0;
    if (a.count > kInlineBytes) return kNo;  // (and no overflow below)
    const size_t bytes = a.count * core::dtype_size(a.dtype);
    switch (a.kind) {
      case core::OpKind::kAllReduce:
      case core::OpKind::kReduce:
      case core::OpKind::kAllGather:
      case core::OpKind::kGather:
        return bytes;
      case core::OpKind::kReduceScatter:
        return bytes * static_cast<size_t>(n);
      default:
        return kNo;
    }
  }
  static bool goes_inline(const core::CollectiveArgs& a, int n) {
    return inline_bytes(a, n) <= kInlineBytes;
  }
  // Inline operations meet here: once every peer's description of this
  // turn is out and is this operation, each rank's input is inlined(r).
  // Like a meeting, no rank leaves before every rank came, so it keeps
  // the bound on how far ahead a rank can be (kDescs).
  void meet_inline();
  bool is_inline() const { return inline_; }
  const uint8_t* inlined(int r) const {
    return seg_.rank_block(r).channel[ch_].desc[turn_ % kDescs].payload;
  }

  // Whether a gather of `most` bytes a rank at most, `total` in all (the
  // same on every rank), goes by single copy.
  bool single_copy(size_t most, size_t total) const {
    if (n_ == 1 || most < kSingleCopyBytes || !seg_.single_copy()) return false;
    return seg_.single_copy_always() ||
           (total < kSingleCopyBelow && !seg_.more_ranks_than_cores());
  }

  // Copies n bytes of rank p's buffer (from its offset `at`) to `to`; after
  // the operation's first meeting.
  void read_from(int p, size_t at, void* to, size_t n) const;

  int me() const { return me_; }
  bool broadcasts_meet() const { return state_.broadcasts_meet; }
  size_t box_bytes() const { return seg_.slot_bytes(ch_) / 2; }
  int n() const { return n_; }
  size_t es() const { return es_; }
  // Bytes of one chunk (a whole number of elements).
  size_t chunk() const { return chunk_; }
  // Each slot has two halves, used by turns: what a rank writes before a
  // meeting goes to the half of this turn, what it reads after the meeting
  // comes from the half of the turn that meeting closed. A rank can be at
  // most one meeting ahead of another, so it never writes the half a peer
  // still reads, and no meeting is needed after the last read.
  uint8_t* slot(int r) const { return half(r, state_.phase); }
  const uint8_t* staged(int r) const { return half(r, state_.phase - 1); }
  const core::CollectiveArgs& args() const { return a_; }

  // The channel's barrier; the first one of the operation also checks
  // that every rank is in the same operation.
  void sync() {
    Barrier& b = seg_.barrier(ch_);
    own().arrived.store(state_.phase + 1, std::memory_order_release);
    const uint32_t gen = b.generation.load(std::memory_order_acquire);
    if (b.count.fetch_add(1, std::memory_order_acq_rel) ==
        static_cast<uint32_t>(n_ - 1)) {
      b.count.store(0, std::memory_order_relaxed);
      b.generation.store(gen + 1, std::memory_order_seq_cst);
      Waiter::wake_sleepers(b.generation, b.sleepers);
    } else {
      awaited_ = kEveryone;
      waiter_.wait_change(b.generation, gen, op_.deadline, b.sleepers, this);
    }
    ++state_.phase;
    if (!checked_) {
      checked_ = true;
      check_peers_agree();
    }
  }

  // Broadcasts that do not meet (broadcast_posted).
  void broadcast_posted();

  // Watch: what the waiter asks while this operation waits.
  void check_peers() const override;
  std::string operation() const override;
  Text missing() const override;

 private:
  static constexpr int kEveryone = -1;

  RankChannel& own() const { return seg_.rank_block(me_).channel[ch_]; }
  const RankChannel& theirs(int r) const { return seg_.rank_block(r).channel[ch_]; }
  const OpDesc& mine() const { return own().desc[turn_ % kDescs]; }
  static uint64_t check_of(const OpDesc& d);

  // After a meeting: every peer (or only `only`) is in this operation.
  void check_peers_agree(int only = kEveryone) const;

  // Throws kMismatch naming both operations unless rank r's description of
  // this turn is this rank's.
  void check_same(int r, const OpDesc& d) const;

  // The oldest broadcast that did not meet, of the last kRecent, that this
  // rank and rank r ran differently.
  Text diverged_broadcast(int r) const;
  // Where rank r was last seen on this channel, for messages.
  std::string latest_of(int r) const;
  // This rank's record of its broadcast `number`; rank r's, copied, if it
  // still holds it.
  bool read_record(int r, uint64_t number, BroadcastRecord* out) const;
  void record_broadcast(uint32_t number);

  uint8_t* half(int r, uint64_t turn) const {
    return seg_.slot(ch_, r) + (turn % 2) * (seg_.slot_bytes(ch_) / 2);
  }

  Segment& seg_;
  const Waiter& waiter_;
  int me_, n_, ch_;
  ChannelState& state_;  // phase: meetings so far, the same on every rank
  const uint64_t turn_;  // operations before this one on this channel, likewise
  const core::Operation& op_;
  const core::CollectiveArgs& a_;
  size_t es_, chunk_;
  const bool inline_;  // its only wait is meet_inline's
  bool checked_ = false;
  // Whom a wait is for: kEveryone at a meeting, else one rank (a
  // broadcast's root, or a peer its root waits for).
  int awaited_ = kEveryone;
  // While a root waits for rank awaited_ to finish its broadcast
  // `checked_broadcast_`: that broadcast's number, else kUnpublished.
  uint64_t checked_broadcast_ = kUnpublished;
};

}  // namespace gang::backends::shm_impl
