#include "backends/shm/shm_collectives.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "backends/shm/shm_run.h"
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

// All-reduces from this size on are split, each rank reducing its share
// (all_reduce_shared). On 2 ranks the split wins from 2-4 KiB, and on n
// ranks the whole-buffer method reads n - 1 peers' inputs where the split
// reads about two, so the split only gains with width; the measurements
// behind it: docs/benchmarks.md.
constexpr size_t kShareFrom = 4 << 10;

// out = rank-order reduction of `count` elements, rank p's at from(p).
template <class From>
void reduce_in_rank_order(const Run& r, void* out, size_t count, From from) {
  const auto& a = r.args();
  if (count == 0) return;
  const ReduceOp op = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
  if (r.n() == 1) {
    copy(out, from(0), count * r.es());
  } else {
    core::reduce(out, from(0), from(1), count, a.dtype, op);
    for (int p = 2; p < r.n(); ++p) core::reduce(out, out, from(p), count, a.dtype, op);
  }
  if (a.op == ReduceOp::kAvg) core::finish_avg(out, count, a.dtype, r.n());
}

// out = rank-order reduction of `bytes` bytes of the n slots, from `at`.
void reduce_slots(Run& r, void* out, size_t bytes, size_t at = 0) {
  reduce_in_rank_order(r, out, bytes / r.es(), [&](int p) { return r.staged(p) + at; });
}

// The operations whose input fits a description (Run::goes_inline): one
// meeting by the descriptions, each rank's input read from its own.
void run_inline(Run& r) {
  const auto& a = r.args();
  r.meet_inline();
  const size_t bytes = a.count * r.es();
  switch (a.kind) {
    case OpKind::kAllReduce:
    case OpKind::kReduce:
      if (a.kind == OpKind::kAllReduce || r.me() == a.root) {
        reduce_in_rank_order(r, a.recv, a.count, [&](int p) { return r.inlined(p); });
      }
      break;
    case OpKind::kAllGather:
    case OpKind::kGather:
      if (a.kind == OpKind::kAllGather || r.me() == a.root) {
        for (int p = 0; p < r.n(); ++p) {
          copy(out_bytes(a.recv) + static_cast<size_t>(p) * bytes, r.inlined(p), bytes);
        }
      }
      break;
    case OpKind::kReduceScatter:
      reduce_in_rank_order(r, a.recv, a.count, [&](int p) {
        return r.inlined(p) + static_cast<size_t>(r.me()) * bytes;
      });
      break;
    default:  // a barrier
      break;
  }
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
// The input goes through the slots as one buffer, a chunk a meeting, and
// each rank reduces the part of its own block the chunk holds: one meeting
// for any input that fits a chunk, however many ranks.
void reduce_scatter(Run& r, const std::vector<size_t>& counts) {
  const auto& a = r.args();
  size_t total = 0, mine_at = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    if (p == static_cast<size_t>(r.me())) mine_at = total;
    total += counts[p] * r.es();
  }
  const size_t mine_end = mine_at + counts[static_cast<size_t>(r.me())] * r.es();
  for (size_t off = 0; off < total || off == 0; off += r.chunk()) {
    const size_t len = std::min(r.chunk(), total - off);
    // In place (recv at this rank's block of send) is safe: a chunk is in
    // the slot before any of its bytes is written as output.
    copy(r.slot(r.me()), in_bytes(a.send) + off, len);
    r.sync();
    const size_t from = std::max(off, mine_at), to = std::min(off + len, mine_end);
    if (from < to) reduce_slots(r, out_bytes(a.recv) + (from - mine_at), to - from, from - off);
    if (total == 0) break;
  }
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
  if (r.is_inline()) {
    run_inline(r);
    return;
  }
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
