#include "backends/shm/shm_collectives.h"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "base/copy.h"
#include "base/error.h"
#include "base/text.h"
#include "core/collective.h"
#include "core/reduce.h"
#include "core/types.h"

namespace gang::backends::shm_impl {

namespace {

using core::OpKind;
using core::ReduceOp;

const uint8_t* in_bytes(const void* p) { return static_cast<const uint8_t*>(p); }
uint8_t* out_bytes(void* p) { return static_cast<uint8_t*>(p); }

void copy(void* to, const void* from, size_t n) { base::copy_bytes(to, from, n); }

// Gathers of this much a rank and more, below kSingleCopyBelow in all,
// copy once, straight from the owner's buffer (process_vm_readv), when the
// segment allows it and every rank has a core of its own (at every size
// from kSingleCopyBytes with GANG_SHM_SINGLE_COPY=always): two meetings and
// one copy instead of a copy in, a meeting and a copy out. Measured on 2
// ranks, 64 KiB to 512 KiB: 5.9 against 6.8 us, 66 against 70-78 us. From
// 1 MiB on the copies in and out win (they stay in cache and the kernel's
// copy pins every page), and with more ranks than cores they win from
// 128 KiB. Broadcasts always copy in and out: the root fills the next chunk
// while the others empty the last, which beat the single copy at every
// size (2 ranks, 256 KiB: 19 against 35 us).
constexpr size_t kSingleCopyBytes = 32 << 10;
constexpr size_t kSingleCopyBelow = 1 << 20;

// All-reduces from this size on are split, each rank reducing its share
// (all_reduce_shared). Measured (float32 sum, median us, one run): 4 ranks
// on 2 cores, 256 KiB 201 -> 158, 4 MiB 1968 -> 1527, 64 MiB 35741 ->
// 29785; 2 ranks, 256 KiB 65 -> 51, 4 MiB 564 -> 476, 16 MiB about even.
constexpr size_t kShareFrom = 64 << 10;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ULL;
}

// Copies a peer's description of `turn` into *out; false while the peer has
// not published it (or has moved on past it). A rank never rewrites a
// description a peer may still expect (kDescs), so the turn read with
// acquire vouches for the rest.
bool read_desc(const OpDesc& d, uint64_t turn, OpDesc* out) {
  if (d.turn.load(std::memory_order_acquire) != turn) return false;
  out->seq = d.seq;
  out->sig = d.sig;
  out->addr = d.addr;
  out->history = d.history;
  out->turn.store(turn, std::memory_order_relaxed);
  return true;
}

bool same_operation(const OpDesc& a, const OpDesc& b) {
  return a.seq == b.seq && a.sig.same(b.sig) && a.history == b.history;
}

std::string describe(const OpDesc& d) { return d.sig.describe(d.seq); }

core::OpSignature signature_of(const BroadcastRecord& b) {
  core::OpSignature s{};
  s.kind = static_cast<uint8_t>(OpKind::kBroadcast);
  s.dtype = static_cast<uint8_t>(b.dtype);
  s.root = b.root;
  s.count = b.count;
  return s;
}

std::string describe(const BroadcastRecord& b) { return signature_of(b).describe(); }

// One operation in progress on one channel. While it waits it is the
// waiter's Watch: `awaited_` says for whom.
class Run final : public Watch {
 public:
  Run(Segment& s, const Waiter& w, int rank, int channel, ChannelState& state,
      const core::Operation& op)
      : seg_(s), waiter_(w), me_(rank), n_(s.size()), ch_(channel),
        state_(state), turn_(state.turns++), op_(op), a_(op.args),
        es_(core::dtype_size(op.args.dtype)),
        chunk_(s.slot_bytes(channel) / 2 / es_ * es_) {
    OpDesc& d = own().desc[turn_ % kDescs];
    d.turn.store(kUnpublished, std::memory_order_relaxed);
    d.seq = op.seq;
    d.sig = core::OpSignature::of(a_);
    // Where peers read this rank's buffer, for a single copy.
    const bool gathers = a_.kind == OpKind::kAllGather || a_.kind == OpKind::kAllGatherV ||
                         a_.kind == OpKind::kGather;
    d.addr = gathers ? reinterpret_cast<uintptr_t>(a_.send) : 0;
    d.history = state.history;
    d.turn.store(turn_, std::memory_order_release);
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
  void read_from(int p, size_t at, void* to, size_t n) const {
    const auto& theirs = seg_.rank_block(p).channel[ch_].desc[turn_ % kDescs];
    const int pid = seg_.rank_block(p).pid.load(std::memory_order_acquire);
    size_t done = 0;
    while (done < n) {
      iovec local{static_cast<uint8_t*>(to) + done, n - done};
      iovec remote{reinterpret_cast<void*>(theirs.addr + at + done), n - done};
      const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
      if (got > 0) {
        done += static_cast<size_t>(got);
      } else if (got < 0 && errno == EINTR) {
        continue;
      } else if (got < 0 && errno == ESRCH) {
        throw core::peers_gone({p}, text("pid ", pid, " ended"));
      } else {
        fail(Status::kSystem, "shm: rank ", me_, " cannot read rank ", p,
             "'s buffer (process_vm_readv: ",
             got < 0 ? base::errno_text(errno) : std::string("nothing read"),
             "); GANG_SHM_SINGLE_COPY=0 on every rank turns single copies off");
      }
    }
  }

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
  std::string operation() const override { return describe(mine()); }
  Text missing() const override;

 private:
  static constexpr int kEveryone = -1;

  RankChannel& own() const { return seg_.rank_block(me_).channel[ch_]; }
  const RankChannel& theirs(int r) const { return seg_.rank_block(r).channel[ch_]; }
  const OpDesc& mine() const { return own().desc[turn_ % kDescs]; }

  // After a meeting: every peer (or only `only`) is in this operation.
  void check_peers_agree(int only = kEveryone) const {
    for (int r = 0; r < n_; ++r) {
      if (r == me_ || (only != kEveryone && r != only)) continue;
      OpDesc d;
      if (!read_desc(theirs(r).desc[turn_ % kDescs], turn_, &d)) {
        fail(Status::kMismatch, "ranks called different operations: rank ", Rank{me_},
             " called ", describe(mine()), " but rank ", Rank{r},
             " is in another operation (", latest_of(r), ")");
      }
      check_same(r, d);
    }
  }

  // Throws kMismatch naming both operations unless rank r's description of
  // this turn is this rank's.
  void check_same(int r, const OpDesc& d) const {
    if (same_operation(d, mine())) return;
    if (d.history != mine().history && d.seq == mine().seq &&
        d.sig.kind == mine().sig.kind) {
      fail(Status::kMismatch, "shm: ranks ran different broadcasts before ",
           describe(mine()), ": ", diverged_broadcast(r));
    }
    if (d.sig.same(mine().sig)) {
      // The same call, but not as the same operation of the gang.
      fail(Status::kMismatch, core::mismatch(me_, mine().sig, r, d.sig),
           " as operations ", mine().seq, " and ", d.seq);
    }
    throw core::mismatch(me_, mine().sig, r, d.sig);
  }

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
  bool checked_ = false;
  // Whom a wait is for: kEveryone at a meeting, else one rank (a
  // broadcast's root, or a peer its root waits for).
  int awaited_ = kEveryone;
  // While a root waits for rank awaited_ to finish its broadcast
  // `checked_broadcast_`: that broadcast's number, else kUnpublished.
  uint64_t checked_broadcast_ = kUnpublished;
};

bool Run::read_record(int r, uint64_t number, BroadcastRecord* out) const {
  const BroadcastRecord& b = theirs(r).recent[number % kRecent];
  if (b.number.load(std::memory_order_acquire) != number) return false;
  out->turn = b.turn;
  out->seq = b.seq;
  out->root = b.root;
  out->dtype = b.dtype;
  out->count = b.count;
  out->history = b.history;
  return true;
}

void Run::record_broadcast(uint32_t number) {
  BroadcastRecord& b = own().recent[number % kRecent];
  b.number.store(kUnpublished, std::memory_order_relaxed);
  b.turn = turn_;
  b.seq = op_.seq;
  b.root = a_.root;
  b.dtype = static_cast<uint32_t>(a_.dtype);
  b.count = a_.count;
  state_.history = mix(mix(mix(mix(mix(state_.history, number), op_.seq),
                               static_cast<uint64_t>(a_.root)),
                           b.dtype),
                       a_.count);
  b.history = state_.history;
  b.number.store(number, std::memory_order_release);
}

Text Run::diverged_broadcast(int r) const {
  const uint32_t last = state_.broadcasts;  // numbers [last - kRecent, last)
  for (uint64_t k = last >= kRecent ? last - kRecent : 0; k < last; ++k) {
    BroadcastRecord mine_k, theirs_k;
    if (!read_record(me_, k, &mine_k) || !read_record(r, k, &theirs_k)) continue;
    if (mine_k.history == theirs_k.history) continue;
    return text("rank ", Rank{me_}, " ran ", describe(mine_k), " but rank ", Rank{r},
                " ran ", describe(theirs_k));
  }
  return text("ranks ", Rank{me_}, " and ", Rank{r}, " differ in a broadcast more than ",
                 kRecent, " broadcasts ago");
}

std::string Run::latest_of(int r) const {
  const RankChannel& c = theirs(r);
  OpDesc best;
  bool any = false;
  for (uint64_t t = turn_ + kDescs; t-- > (turn_ >= kDescs ? turn_ - kDescs : 0);) {
    if (read_desc(c.desc[t % kDescs], t, &best)) {
      any = true;
      break;
    }
  }
  if (!any) return "no operation on this channel yet";
  const uint64_t t = best.turn.load(std::memory_order_relaxed);
  if (t == turn_) return str_cat("in ", describe(best));
  if (t > turn_) return str_cat(t - turn_, " operation(s) ahead, in ", describe(best));
  return str_cat(turn_ - t, " operation(s) behind, last seen in ", describe(best));
}

void Run::check_peers() const {
  if (checked_broadcast_ != kUnpublished) {
    // A root waits for rank awaited_ to finish an earlier broadcast: what
    // that rank runs at the broadcast's turn, if it got there, is it.
    BroadcastRecord rec;
    OpDesc d;
    if (!read_record(me_, checked_broadcast_, &rec) ||
        !read_desc(theirs(awaited_).desc[rec.turn % kDescs], rec.turn, &d)) {
      return;
    }
    const core::OpSignature ran = signature_of(rec);
    if (d.seq != rec.seq || !d.sig.same(ran)) {
      throw core::mismatch(me_, ran, awaited_, d.sig);
    }
    return;
  }
  for (int r = 0; r < n_; ++r) {
    if (r == me_ || (awaited_ != kEveryone && r != awaited_)) continue;
    OpDesc d;
    if (read_desc(theirs(r).desc[turn_ % kDescs], turn_, &d)) check_same(r, d);
  }
}

Text Run::missing() const {
  Text s;
  const uint64_t here = own().arrived.load(std::memory_order_relaxed);
  for (int r = 0; r < n_; ++r) {
    if (r == me_ || (awaited_ != kEveryone && r != awaited_)) continue;
    if (awaited_ == kEveryone &&
        theirs(r).arrived.load(std::memory_order_acquire) >= here) {
      continue;  // at this meeting already
    }
    const int pid = seg_.rank_block(r).pid.load(std::memory_order_acquire);
    s.add(text(s.empty() ? "" : "; ", "rank ", Rank{r}, " (pid ", pid, ", ", latest_of(r), ")"));
  }
  return s.empty() ? text("ranks that arrived meanwhile") : s;
}

// True once the counter `value` reached `target` (counters wrap).
bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

void await_reached(const Waiter& w, Signal& sig, uint32_t target,
                   core::Clock::time_point deadline, const Watch* watch) {
  for (;;) {
    const uint32_t seen = sig.value.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    w.wait_change(sig.value, seen, deadline, sig.sleepers, watch);
  }
}

void signal(Signal& sig, uint32_t value) {
  sig.value.store(value, std::memory_order_seq_cst);
  Waiter::wake_sleepers(sig.value, sig.sleepers);
}

// Small broadcasts do not meet: the root copies into one of its two boxes,
// posts, and goes on; every other rank waits for the post, checks that the
// root is in the same operation, copies out and says it is done. Before
// the root fills a box again it waits until every rank is done with the
// broadcast before the last (the one that used that box). So a root runs at
// most one broadcast ahead, and one operation: it never overwrites the
// description a peer still checks.
//
// What is caught when. Every rank records each such broadcast (number,
// seq, root, dtype, count) and folds it into a history that the
// description of its next operation carries. A rank waiting for a root
// compares the root's description, history included, as soon as the root
// publishes it, and a root waiting for a peer compares what the peer runs at
// the turn of the broadcast it waits for; so ranks in different operations
// fail at once. Two ranks that both act as the root (or disagree on which
// rank is) wait for nobody: their histories differ from then on, and the
// next operation that meets, the next broadcast one of them receives, or
// the one after next that either roots, fails with kMismatch naming the
// broadcast that diverged. A mismatch fails the gang in the segment, so
// every rank learns of it.
void Run::broadcast_posted() {
  const uint32_t b = state_.broadcasts;
  const size_t bytes = a_.count * es_;
  const int root = a_.root;
  uint8_t* box = seg_.box(ch_, root, static_cast<int>(b % 2));
  if (me_ == root) {
    for (int p = 0; p < n_; ++p) {
      if (p == me_) continue;
      awaited_ = p;
      checked_broadcast_ = b >= 2 ? b - 2 : kUnpublished;
      await_reached(waiter_, seg_.rank_block(p).channel[ch_].consumed, b - 1,
                    op_.deadline, this);
      if (b >= 2) {
        // The peer finished broadcast b - 2: did it run it as this rank did?
        BroadcastRecord mine_k, theirs_k;
        if (read_record(me_, b - 2, &mine_k) && read_record(p, b - 2, &theirs_k) &&
            mine_k.history != theirs_k.history) {
          fail(Status::kMismatch, "shm: ranks ran different broadcasts: ",
               diverged_broadcast(p));
        }
      }
    }
    checked_broadcast_ = kUnpublished;
    copy(box, a_.recv, bytes);
    signal(own().posted, b + 1);
  } else {
    awaited_ = root;
    await_reached(waiter_, seg_.rank_block(root).channel[ch_].posted, b + 1,
                  op_.deadline, this);
    check_peers_agree(root);
    copy(a_.recv, box, bytes);
  }
  record_broadcast(b);
  state_.broadcasts = b + 1;
  signal(own().consumed, b + 1);
}

// out = rank-order reduction of `bytes` bytes of the n slots, from `at`.
void reduce_slots(Run& r, void* out, size_t bytes, size_t at = 0) {
  const auto& a = r.args();
  const size_t count = bytes / r.es();
  if (count == 0) return;
  const ReduceOp op = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
  if (r.n() == 1) {
    copy(out, r.staged(0) + at, bytes);
  } else {
    core::reduce(out, r.staged(0) + at, r.staged(1) + at, count, a.dtype, op);
    for (int p = 2; p < r.n(); ++p) {
      core::reduce(out, out, r.staged(p) + at, count, a.dtype, op);
    }
  }
  if (a.op == ReduceOp::kAvg) core::finish_avg(out, count, a.dtype, r.n());
}

// Small all-reduces, and reduces: every rank that receives reduces the
// whole of each chunk (one meeting a chunk).
void all_reduce(Run& r, bool only_root) {
  const auto& a = r.args();
  const size_t bytes = a.count * r.es();
  const bool receives = !only_root || r.me() == a.root;
  for (size_t off = 0; off < bytes || off == 0; off += r.chunk()) {
    const size_t len = std::min(r.chunk(), bytes - off);
    copy(r.slot(r.me()), in_bytes(a.send) + off, len);
    r.sync();
    if (receives) reduce_slots(r, out_bytes(a.recv) + off, len);
    if (bytes == 0) break;
  }
}

// Large all-reduces: each rank reduces its share of every chunk and
// publishes it in its slot, then copies the others' shares (a
// reduce-scatter and an all-gather through the slots): two meetings a
// chunk, but each rank reads every input once instead of n times.
void all_reduce_shared(Run& r) {
  const auto& a = r.args();
  const size_t bytes = a.count * r.es();
  const size_t n = static_cast<size_t>(r.n());
  const size_t me = static_cast<size_t>(r.me());
  uint8_t* out = out_bytes(a.recv);
  for (size_t off = 0; off < bytes; off += r.chunk()) {
    const size_t len = std::min(r.chunk(), bytes - off);
    const size_t share = (len / r.es() + n - 1) / n * r.es();
    const auto begin = [&](size_t p) { return std::min(len, p * share); };
    copy(r.slot(r.me()), in_bytes(a.send) + off, len);
    r.sync();
    const size_t mine = begin(me), mine_end = begin(me + 1);
    reduce_slots(r, out + off + mine, mine_end - mine, mine);
    copy(r.slot(r.me()) + mine, out + off + mine, mine_end - mine);
    r.sync();
    for (size_t p = 0; p < n; ++p) {
      if (p != me) {
        copy(out + off + begin(p), r.staged(static_cast<int>(p)) + begin(p),
             begin(p + 1) - begin(p));
      }
    }
  }
}

void broadcast(Run& r) {
  const auto& a = r.args();
  const size_t bytes = a.count * r.es();
  if (r.n() > 1 && !r.broadcasts_meet() && bytes < kSingleCopyBytes &&
      bytes <= r.box_bytes()) {
    r.broadcast_posted();
    return;
  }
  for (size_t off = 0; off < bytes || off == 0; off += r.chunk()) {
    const size_t len = std::min(r.chunk(), bytes - off);
    if (r.me() == a.root) copy(r.slot(a.root), in_bytes(a.recv) + off, len);
    r.sync();
    if (r.me() != a.root) copy(out_bytes(a.recv) + off, r.staged(a.root), len);
    if (bytes == 0) break;
  }
}

// all_gather(v) and gather: rank p contributes counts[p] elements to recv at
// offsets[p]; `only_root` for gather.
void gather_like(Run& r, const std::vector<size_t>& counts, bool only_root) {
  const auto& a = r.args();
  std::vector<size_t> at(counts.size());
  size_t most = 0, sum = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    at[p] = sum * r.es();
    sum += counts[p];
    most = std::max(most, counts[p] * r.es());
  }
  const bool receives = !only_root || r.me() == a.root;
  const size_t mine = counts[static_cast<size_t>(r.me())] * r.es();
  if (r.single_copy(most, sum * r.es())) {
    r.sync();  // every rank's address is out
    if (receives) {
      for (int p = 0; p < r.n(); ++p) {
        const size_t theirs = counts[static_cast<size_t>(p)] * r.es();
        if (p != r.me() && theirs != 0) {
          r.read_from(p, 0, out_bytes(a.recv) + at[static_cast<size_t>(p)], theirs);
        }
      }
      // Its own block last, while the peers may still read theirs from it.
      base::move_bytes(out_bytes(a.recv) + at[static_cast<size_t>(r.me())], a.send, mine);
    }
    r.sync();  // every buffer is read
    return;
  }
  for (size_t off = 0; off < most || off == 0; off += r.chunk()) {
    if (off < mine) {
      copy(r.slot(r.me()), in_bytes(a.send) + off, std::min(r.chunk(), mine - off));
    }
    r.sync();
    if (receives) {
      for (int p = 0; p < r.n(); ++p) {
        const size_t theirs = counts[static_cast<size_t>(p)] * r.es();
        if (off >= theirs) continue;
        copy(out_bytes(a.recv) + at[static_cast<size_t>(p)] + off, r.staged(p),
             std::min(r.chunk(), theirs - off));
      }
    }
    if (most == 0) break;
  }
}

void scatter(Run& r) {
  const auto& a = r.args();
  const size_t bytes = a.count * r.es();
  for (size_t off = 0; off < bytes || off == 0; off += r.chunk()) {
    const size_t len = std::min(r.chunk(), bytes - off);
    if (r.me() == a.root) {
      for (int p = 0; p < r.n(); ++p) {
        copy(r.slot(p), in_bytes(a.send) + static_cast<size_t>(p) * bytes + off, len);
      }
    }
    r.sync();
    copy(out_bytes(a.recv) + off, r.staged(r.me()), len);
    if (bytes == 0) break;
  }
}

// reduce_scatter(v): rank p gets the reduction of every rank's block p.
void reduce_scatter(Run& r, const std::vector<size_t>& counts) {
  const auto& a = r.args();
  size_t at = 0;
  for (int p = 0; p < r.n(); ++p) {
    const size_t bytes = counts[static_cast<size_t>(p)] * r.es();
    // In place (recv inside send at this rank's block) is safe: block p is
    // read into the slot before anyone writes an output.
    for (size_t off = 0; off < bytes; off += r.chunk()) {
      const size_t len = std::min(r.chunk(), bytes - off);
      copy(r.slot(r.me()), in_bytes(a.send) + at + off, len);
      r.sync();
      if (p == r.me()) reduce_slots(r, out_bytes(a.recv) + off, len);
    }
    at += bytes;
  }
  if (at == 0) r.sync();  // an empty operation still meets once
}

// all_to_all(v): each slot is cut into n boxes, box p for rank p.
void all_to_all(Run& r, const std::vector<size_t>& send_counts,
                const std::vector<size_t>& recv_counts) {
  const auto& a = r.args();
  const size_t n = static_cast<size_t>(r.n());
  const size_t box = r.chunk() / n / r.es() * r.es();
  if (box == 0) {
    fail(Status::kUnsupported, "shm: the slot is too small for all_to_all over ",
         n, " ranks");
  }
  std::vector<size_t> send_at(n), recv_at(n);
  size_t most = 0;
  for (size_t p = 0, s = 0, q = 0; p < n; ++p) {
    send_at[p] = s;
    recv_at[p] = q;
    s += send_counts[p] * r.es();
    q += recv_counts[p] * r.es();
    most = std::max({most, send_counts[p] * r.es(), recv_counts[p] * r.es()});
  }
  // Every rank must run the same number of rounds: agree on the largest
  // block first, and check that what each rank sends is what its peer
  // expects.
  auto* said = reinterpret_cast<uint64_t*>(r.slot(r.me()));
  for (size_t p = 0; p < n; ++p) said[p] = send_counts[p];
  said[n] = most;
  r.sync();
  for (size_t p = 0; p < n; ++p) {
    const auto* theirs = reinterpret_cast<const uint64_t*>(r.staged(static_cast<int>(p)));
    most = std::max<size_t>(most, theirs[n]);
    if (theirs[r.me()] != recv_counts[p]) {
      const uint64_t sent = theirs[r.me()];
      fail(Status::kMismatch, "gang_all_to_allv: rank ", Rank{static_cast<int>(p)}, " sends ", sent,
           " elements to rank ", Rank{r.me()}, ", which expects ", recv_counts[p]);
    }
  }
  for (size_t off = 0; off < most; off += box) {
    for (size_t p = 0; p < n; ++p) {
      const size_t bytes = send_counts[p] * r.es();
      if (off < bytes) {
        copy(r.slot(r.me()) + p * box, in_bytes(a.send) + send_at[p] + off,
             std::min(box, bytes - off));
      }
    }
    r.sync();
    for (size_t p = 0; p < n; ++p) {
      const size_t bytes = recv_counts[p] * r.es();
      if (off < bytes) {
        copy(out_bytes(a.recv) + recv_at[p] + off,
             r.staged(static_cast<int>(p)) + static_cast<size_t>(r.me()) * box,
             std::min(box, bytes - off));
      }
    }
  }
}

}  // namespace

void run_collective(Segment& segment, const Waiter& waiter, int rank,
                    int channel, ChannelState& state, const core::Operation& op) {
  Run r(segment, waiter, rank, channel, state, op);
  const auto& a = op.args;
  const size_t n = static_cast<size_t>(segment.size());
  switch (a.kind) {
    case OpKind::kAllReduce:
      if (n > 1 && a.count * core::dtype_size(a.dtype) >= kShareFrom) {
        all_reduce_shared(r);
      } else {
        all_reduce(r, false);
      }
      break;
    case OpKind::kReduce:
      all_reduce(r, true);
      break;
    case OpKind::kBroadcast:
      broadcast(r);
      break;
    case OpKind::kAllGather:
      gather_like(r, std::vector<size_t>(n, a.count), false);
      break;
    case OpKind::kGather:
      gather_like(r, std::vector<size_t>(n, a.count), true);
      break;
    case OpKind::kAllGatherV:
      gather_like(r, a.recv_counts, false);
      break;
    case OpKind::kScatter:
      scatter(r);
      break;
    case OpKind::kReduceScatter:
      reduce_scatter(r, std::vector<size_t>(n, a.count));
      break;
    case OpKind::kReduceScatterV:
      reduce_scatter(r, a.recv_counts);
      break;
    case OpKind::kAllToAll:
      all_to_all(r, std::vector<size_t>(n, a.count), std::vector<size_t>(n, a.count));
      break;
    case OpKind::kAllToAllV:
      all_to_all(r, a.send_counts, a.recv_counts);
      break;
    case OpKind::kBarrier:
      r.sync();
      break;
    case OpKind::kSend:
    case OpKind::kRecv:
      fail(Status::kInternal, "shm: run_collective got a point-to-point operation");
  }
}

}  // namespace gang::backends::shm_impl
