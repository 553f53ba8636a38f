#include "backends/shm/shm_run.h"

#include <sys/uio.h>

#include <cerrno>
#include <string>

#include "base/copy.h"
#include "base/text.h"

namespace gang::backends::shm_impl {

namespace {

using core::OpKind;

void copy(void* to, const void* from, size_t n) { base::copy_bytes(to, from, n); }

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xbf58476d1ce4e5b9ULL;
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
  s.outer = b.outer;
  return s;
}

std::string describe(const BroadcastRecord& b) { return signature_of(b).describe(); }

}  // namespace

// A rank never rewrites a description a peer may still expect (kDescs), so
// the turn read with acquire vouches for the rest.
bool read_desc(const OpDesc& d, uint64_t turn, OpDesc* out) {
  if (d.turn.load(std::memory_order_acquire) != turn) return false;
  out->check = d.check;
  out->seq = d.seq;
  out->sig = d.sig;
  out->addr = d.addr;
  out->history = d.history;
  out->turn.store(turn, std::memory_order_relaxed);
  return true;
}

std::string Run::operation() const { return describe(mine()); }

// What same_operation compares, and only that: ranks of an all_gatherv
// pass counts of their own, and agree on the total and the counts' hash.
uint64_t Run::check_of(const OpDesc& d) {
  const core::OpSignature& s = d.sig;
  uint64_t h = mix(mix(d.seq, d.history), s.kind | s.dtype << 8 | s.op << 16 |
                                              uint64_t{static_cast<uint32_t>(s.root)} << 32);
  if (core::per_rank_counts(static_cast<OpKind>(s.kind))) {
    h = mix(mix(h, s.total), s.counts_hash);
  } else {
    h = mix(h, s.count);
  }
  return mix(h, s.outer);
}

void Run::meet_inline() {
  for (int p = 0; p < n_; ++p) {
    if (p == me_) continue;
    RankChannel& c = seg_.rank_block(p).channel[ch_];
    const OpDesc& d = c.desc[turn_ % kDescs];
    if (!waiter_.spin_until(d.turn, turn_)) {
      // Its `joined` changes once the description is out.
      for (;;) {
        const uint32_t seen = c.joined.value.load(std::memory_order_acquire);
        if (d.turn.load(std::memory_order_acquire) == turn_) break;
        waiter_.wait_change(c.joined.value, seen, op_.deadline, c.joined.sleepers, this);
      }
    }
  }
  check_peers_agree();
}

void Run::read_from(int p, size_t at, void* to, size_t n) const {
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

void Run::check_peers_agree(int only) const {
  for (int r = 0; r < n_; ++r) {
    if (r == me_ || (only != kEveryone && r != only)) continue;
    // The check first, in the line with the turn; the fields only to name
    // a difference.
    const OpDesc& published = theirs(r).desc[turn_ % kDescs];
    if (published.turn.load(std::memory_order_acquire) == turn_ &&
        published.check == mine().check) {
      continue;
    }
    OpDesc d;
    if (!read_desc(theirs(r).desc[turn_ % kDescs], turn_, &d)) {
      throw core::mismatch(text("rank ", Rank{me_}, " called ", describe(mine()), " but rank ",
                                Rank{r}, " is in another operation (", latest_of(r), ")"));
    }
    check_same(r, d);
  }
}

void Run::check_same(int r, const OpDesc& d) const {
  if (same_operation(d, mine())) return;
  if (d.history != mine().history && d.seq == mine().seq &&
      d.sig.kind == mine().sig.kind) {
    throw core::mismatch(text(diverged_broadcast(r), ", before ", describe(mine())));
  }
  if (d.sig.same(mine().sig)) {
    // The same call, but not as the same operation of the gang.
    fail(Status::kMismatch, core::mismatch(me_, mine().sig, r, d.sig),
         " as operations ", mine().seq, " and ", d.seq);
  }
  throw core::mismatch(me_, mine().sig, r, d.sig);
}

bool Run::read_record(int r, uint64_t number, BroadcastRecord* out) const {
  const BroadcastRecord& b = theirs(r).recent[number % kRecent];
  if (b.number.load(std::memory_order_acquire) != number) return false;
  out->turn = b.turn;
  out->seq = b.seq;
  out->root = b.root;
  out->dtype = b.dtype;
  out->count = b.count;
  out->outer = b.outer;
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
  b.outer = a_.outer;
  state_.history = mix(mix(mix(mix(mix(state_.history, number), op_.seq),
                               static_cast<uint64_t>(a_.root)),
                           b.dtype),
                       a_.count);
  // A step's broadcast (a two-level gang's) also by the operation it is a step of.
  if (a_.outer != 0) state_.history = mix(state_.history, a_.outer);
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
    if (inline_ ? theirs(r).desc[turn_ % kDescs].turn.load(std::memory_order_acquire) == turn_
                     : awaited_ == kEveryone &&
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
          throw core::mismatch(diverged_broadcast(p));
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

}  // namespace gang::backends::shm_impl
