#include "backends/gloo/gloo_collectives.h"

#include <gloo/types.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "backends/gloo/gloo_frames.h"
#include "backends/gloo/gloo_pairs.h"
#include "backends/gloo/gloo_view.h"
#include "base/env.h"
#include "base/copy.h"
#include "base/error.h"
#include "core/collective.h"
#include "core/reduce.h"

namespace gang::backends::gloo_impl {

namespace {

using core::CollectiveArgs;
using core::OpKind;
using core::ReduceOp;

// Slot prefixes: each kind of traffic has its own, so a frame never meets a
// payload and a user's tag never meets a collective's sequence number.
constexpr uint8_t kPayloadPrefix = 0x45;

// Payloads posted together with the frames, before those are checked, so
// that the frames' round trip overlaps the payload's. Each travels in
// chunks of at most kEarlyChunkBytes whose exact size is the slot's low
// bits: a payload of another size (ranks that disagree) never matches a
// receive, where Gloo would abort the process, and the frame check reports
// the disagreement. A rank that finds one fails and closes its connections,
// which ends the waits of the sends it left unmatched.
constexpr uint8_t kEarlyPayloadPrefix = 0x48;
constexpr size_t kEarlyChunkBytes = size_t{1} << 23;  // fits the 24 low bits

using base::copy_bytes;
using base::move_bytes;

// Posts [offset, offset + n) of b to (send) or from `peer` on early slots.
void post_early(Transfers& t, ::gloo::transport::UnboundBuffer* b, bool send,
                int peer, uint32_t tag, size_t offset, size_t n) {
  for (size_t done = 0; done < n;) {
    const size_t c = std::min(n - done, kEarlyChunkBytes);
    const uint64_t sl = slot(kEarlyPayloadPrefix, tag, static_cast<uint32_t>(c));
    if (send) {
      t.send(b, peer, sl, offset + done, c);
    } else {
      t.recv(b, peer, sl, offset + done, c);
    }
    done += c;
  }
}

uint8_t* bytes_of(void* p) { return static_cast<uint8_t*>(p); }
const uint8_t* bytes_of(const void* p) { return static_cast<const uint8_t*>(p); }

// One operation on one rank: its context, identity and deadline.
struct Run {
  const std::shared_ptr<::gloo::Context>& ctx;
  const std::shared_ptr<Waits>& waits;
  Scratch& scratch;
  const core::Operation& op;
  const CollectiveArgs& a;
  uint32_t tag;
  int n;
  int me;
  size_t es;

  // The algorithm this operation runs, chosen by the dispatch from facts
  // every rank has (the counts, the gang's size), never from a rank's own
  // block: the frames carry it and agree() compares.
  Algorithm chosen;

  Run(const std::shared_ptr<::gloo::Context>& c,
      const std::shared_ptr<Waits>& w, Scratch& sc, const core::Operation& o,
      Algorithm ch)
      : ctx(c),
        waits(w),
        scratch(sc),
        op(o),
        a(o.args),
        tag(wire_tag(o)),
        n(c->size),
        me(c->rank),
        es(core::dtype_size(o.args.dtype)),
        chosen(ch) {}

  int left() const { return (me + n - 1) % n; }
  int right() const { return (me + 1) % n; }
  std::vector<int> everyone_else() const {
    std::vector<int> v;
    for (int p = 0; p < n; ++p) {
      if (p != me) v.push_back(p);
    }
    return v;
  }
  std::vector<int> neighbours() const {
    std::vector<int> v = {left()};
    if (right() != left()) v.push_back(right());
    return v;
  }
  // The ranks this one exchanges with in a rooted direct algorithm.
  std::vector<int> rooted() const {
    return me == a.root ? everyone_else() : std::vector<int>{a.root};
  }
};

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "automatic";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
  }
  return "unknown";
}

std::vector<int> merged(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

// Agrees with `partners` on the operation (see gloo_frames.h). to_you and
// from_you give, per rank, the bytes this rank sends it and expects from it
// (0 for the uniform collectives, whose sizes follow from the counts).
// `inline_out` (per rank, may be null) rides in the frames when it fits;
// returns the frames received, indexed by rank.
std::vector<Frame> agree(const Run& r, const std::vector<int>& partners,
                         const std::vector<uint64_t>* to_you = nullptr,
                         const std::vector<uint64_t>* from_you = nullptr,
                         const std::vector<const void*>* inline_out = nullptr,
                         size_t inline_len = 0) {
  std::vector<Frame> out(static_cast<size_t>(r.n)), in(static_cast<size_t>(r.n));
  for (int p : partners) {
    const auto i = static_cast<size_t>(p);
    out[i] = make_frame(r.op, to_you ? (*to_you)[i] : 0,
                        from_you ? (*from_you)[i] : 0);
    out[i].algorithm = static_cast<uint8_t>(r.chosen);
    if (inline_out && (*inline_out)[i] && inline_len <= kInlineBytes) {
      out[i].inline_len = static_cast<uint16_t>(inline_len);
      copy_bytes(out[i].data, (*inline_out)[i], inline_len);
    }
  }
  exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in);
  for (int p : partners) {
    const uint8_t theirs = in[static_cast<size_t>(p)].algorithm;
    if (theirs != static_cast<uint8_t>(r.chosen)) {
      fail(Status::kInternal, core::op_api_name(r.a.kind), ": rank ", r.me, " chose the ",
           algorithm_name(r.chosen), " algorithm but rank ", p, " chose the ",
           algorithm_name(static_cast<Algorithm>(theirs)),
           " (a choice that must be made from what every rank knows)");
    }
  }
  return in;
}

// The same block of `bytes` at `data` for every partner.
std::vector<const void*> same_for_all(const Run& r, const void* data) {
  return std::vector<const void*>(static_cast<size_t>(r.n), data);
}

ReduceOp partial_op(ReduceOp op) {
  return op == ReduceOp::kAvg ? ReduceOp::kSum : op;
}

// `count` elements split into n nearly equal chunks.
std::vector<size_t> even_chunks(size_t count, int n) {
  std::vector<size_t> c(static_cast<size_t>(n), count / static_cast<size_t>(n));
  for (size_t i = 0; i < count % static_cast<size_t>(n); ++i) ++c[i];
  return c;
}

size_t total_of(const std::vector<size_t>& counts) {
  size_t t = 0;
  for (size_t c : counts) t += c;
  return t;
}

size_t largest_of(const std::vector<size_t>& counts) {
  size_t largest = 0;
  for (size_t c : counts) largest = std::max(largest, c);
  return largest;
}

// An all-gather's own block (counts and offsets per rank, in elements) moved
// into its place in the output, which it returns.
uint8_t* place_own_block(const Run& r, const std::vector<size_t>& counts,
                         const std::vector<size_t>& offsets) {
  const size_t me = static_cast<size_t>(r.me);
  uint8_t* out = bytes_of(r.a.recv);
  if (counts[me] != 0 && r.a.send != out + offsets[me] * r.es) {
    move_bytes(out + offsets[me] * r.es, r.a.send, counts[me] * r.es);
  }
  return out;
}

// Every rank sends its whole input to every peer, then reduces the n inputs
// in rank order, so every rank computes the same bits. `root` >= 0: only
// the root receives and reduces (gang_reduce).
void direct_reduce_to(const Run& r, int root) {
  const void* const send = r.a.send;
  void* const recv = r.a.recv;
  const size_t bytes = r.a.count * r.es;
  const size_t n = static_cast<size_t>(r.n);
  const size_t me = static_cast<size_t>(r.me);
  const bool receives = root < 0 || root == r.me;
  const std::vector<int> partners =
      root < 0 ? r.everyone_else() : r.rooted();
  const bool fits = bytes <= kInlineBytes;
  // The other ranks' inputs, uninitialised (rank p at slot p, or p - 1
  // above this rank); this rank's own input is read where it lies.
  const size_t others = receives ? (n - 1) * bytes : 0;
  uint8_t* const all = r.scratch.get(0, others);
  auto slot_of = [&](size_t p) { return (p < me ? p : p - 1) * bytes; };
  if (fits) {
    const auto mine = same_for_all(r, send);
    const std::vector<Frame> in = agree(r, partners, nullptr, nullptr, &mine, bytes);
    if (!receives) return;  // the frame carried it
    for (int p : partners) {
      copy_bytes(all + slot_of(static_cast<size_t>(p)),
                  in[static_cast<size_t>(p)].data, bytes);
    }
  } else {
    Transfers t(r.ctx, r.waits, r.op.deadline);
    auto* out = t.buffer(send, bytes);
    auto* all_buf = receives ? t.buffer(all, others) : nullptr;
    for (int p : partners) {
      if (receives) {
        post_early(t, all_buf, false, p, r.tag, slot_of(static_cast<size_t>(p)), bytes);
      }
      if (root < 0 || p == root) post_early(t, out, true, p, r.tag, 0, bytes);
    }
    agree(r, partners);
    t.wait();
  }
  if (!receives || bytes == 0) return;
  // Rank order on every rank, so every rank computes the same bits. In
  // place, this rank's input is overwritten by the first partial results
  // unless it is rank 0 or 1: keep a copy then.
  const uint8_t* own = bytes_of(send);
  if (send == recv && me >= 2) {
    uint8_t* copy = r.scratch.get(1, bytes);
    copy_bytes(copy, send, bytes);
    own = copy;
  }
  auto input = [&](size_t p) {
    return p == me ? own : all + slot_of(p);
  };
  const ReduceOp op = partial_op(r.a.op);
  core::reduce(recv, input(0), input(1), r.a.count, r.a.dtype, op);
  for (size_t p = 2; p < n; ++p) {
    core::reduce(recv, recv, input(p), r.a.count, r.a.dtype, op);
  }
  if (r.a.op == ReduceOp::kAvg) {
    core::finish_avg(recv, r.a.count, r.a.dtype, r.n);
  }
}

void direct_all_reduce(const Run& r) { direct_reduce_to(r, -1); }

void direct_reduce(const Run& r) { direct_reduce_to(r, r.a.root); }

void direct_broadcast(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  const bool fits = bytes <= kInlineBytes;
  if (fits) {
    const auto mine = same_for_all(r, r.a.recv);
    const auto in = agree(r, r.rooted(), nullptr, nullptr, root ? &mine : nullptr, bytes);
    if (!root) copy_bytes(r.a.recv, in[static_cast<size_t>(r.a.root)].data, bytes);
    return;
  }
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* b = t.buffer(r.a.recv, bytes);
  for (int p : r.rooted()) post_early(t, b, root, p, r.tag, 0, bytes);
  agree(r, r.rooted());
  t.wait();
}

// all_gather and all_gatherv: counts per rank (elements).
void direct_all_gather(const Run& r, const std::vector<size_t>& counts) {
  const auto offsets = core::prefix_offsets(counts);
  const size_t total = total_of(counts);
  const size_t me = static_cast<size_t>(r.me);
  const size_t own = counts[me] * r.es;
  uint8_t* out = place_own_block(r, counts, offsets);
  // Blocks that fit ride in the frames: one message per peer.
  if (largest_of(counts) * r.es <= kInlineBytes) {
    const auto mine = same_for_all(r, out + offsets[me] * r.es);
    const auto in = agree(r, r.everyone_else(), nullptr, nullptr, &mine, own);
    for (int p : r.everyone_else()) {
      const auto i = static_cast<size_t>(p);
      copy_bytes(out + offsets[i] * r.es, in[i].data, counts[i] * r.es);
    }
    return;
  }
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* b = t.buffer(out, total * r.es);
  for (int p : r.everyone_else()) {
    const auto i = static_cast<size_t>(p);
    post_early(t, b, false, p, r.tag, offsets[i] * r.es, counts[i] * r.es);
    post_early(t, b, true, p, r.tag, offsets[me] * r.es, own);
  }
  agree(r, r.everyone_else());
  t.wait();
}

void direct_gather(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  const bool fits = bytes <= kInlineBytes;
  const auto mine = same_for_all(r, r.a.send);
  const auto in = agree(r, r.rooted(), nullptr, nullptr,
                        fits && !root ? &mine : nullptr, bytes);
  if (root) {
    uint8_t* out = bytes_of(r.a.recv);
    const size_t me = static_cast<size_t>(r.me);
    if (r.a.send != out + me * bytes) move_bytes(out + me * bytes, r.a.send, bytes);
    if (fits) {
      for (int p : r.everyone_else()) {
        copy_bytes(out + static_cast<size_t>(p) * bytes,
                    in[static_cast<size_t>(p)].data, bytes);
      }
      return;
    }
  } else if (fits) {
    return;
  }
  Transfers t(r.ctx, r.waits, r.op.deadline);
  const uint64_t sl = slot(kPayloadPrefix, r.tag, 0);
  if (root) {
    auto* b = t.buffer(r.a.recv, bytes * static_cast<size_t>(r.n));
    for (int p : r.everyone_else()) {
      t.recv(b, p, sl, static_cast<size_t>(p) * bytes, bytes);
    }
  } else {
    t.send(t.buffer(r.a.send, bytes), r.a.root, sl, 0, bytes);
  }
  t.wait();
}

void direct_scatter(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  const bool fits = bytes <= kInlineBytes;
  std::vector<const void*> chunks(static_cast<size_t>(r.n), nullptr);
  if (root) {
    for (int p = 0; p < r.n; ++p) {
      chunks[static_cast<size_t>(p)] = bytes_of(r.a.send) + static_cast<size_t>(p) * bytes;
    }
  }
  const auto in = agree(r, r.rooted(), nullptr, nullptr,
                        fits && root ? &chunks : nullptr, bytes);
  if (root) {
    const size_t me = static_cast<size_t>(r.me);
    const uint8_t* own = bytes_of(r.a.send) + me * bytes;
    if (r.a.recv != own) move_bytes(r.a.recv, own, bytes);
  } else if (fits) {
    copy_bytes(r.a.recv, in[static_cast<size_t>(r.a.root)].data, bytes);
  }
  if (fits) return;
  Transfers t(r.ctx, r.waits, r.op.deadline);
  const uint64_t sl = slot(kPayloadPrefix, r.tag, 0);
  if (root) {
    auto* b = t.buffer(r.a.send, bytes * static_cast<size_t>(r.n));
    for (int p : r.everyone_else()) {
      t.send(b, p, sl, static_cast<size_t>(p) * bytes, bytes);
    }
  } else {
    t.recv(t.buffer(r.a.recv, bytes), r.a.root, sl, 0, bytes);
  }
  t.wait();
}

// all_to_all and all_to_allv: per-peer element counts each way.
void direct_all_to_all(const Run& r, const std::vector<size_t>& send_counts,
                       const std::vector<size_t>& recv_counts) {
  const size_t n = static_cast<size_t>(r.n);
  const size_t me = static_cast<size_t>(r.me);
  const auto soff = core::prefix_offsets(send_counts);
  const auto roff = core::prefix_offsets(recv_counts);
  std::vector<uint64_t> to(n), from(n);
  for (size_t p = 0; p < n; ++p) {
    to[p] = send_counts[p] * r.es;
    from[p] = recv_counts[p] * r.es;
  }
  agree(r, r.everyone_else(), &to, &from);
  if (recv_counts[me] != 0) {
    copy_bytes(bytes_of(r.a.recv) + roff[me] * r.es,
                bytes_of(r.a.send) + soff[me] * r.es, recv_counts[me] * r.es);
  }
  Transfers t(r.ctx, r.waits, r.op.deadline);
  const uint64_t sl = slot(kPayloadPrefix, r.tag, 0);
  auto* sb = t.buffer(r.a.send, total_of(send_counts) * r.es);
  auto* rb = t.buffer(r.a.recv, total_of(recv_counts) * r.es);
  for (int p : r.everyone_else()) {
    const auto i = static_cast<size_t>(p);
    t.recv(rb, p, sl, roff[i] * r.es, from[i]);
    t.send(sb, p, sl, soff[i] * r.es, to[i]);
  }
  t.wait();
}

// Every rank exchanges frames with every other.
void direct_barrier(const Run& r) { agree(r, r.everyone_else()); }

// Ring reduce-scatter over acc (chunks at offsets/counts, in elements): in
// step s every rank passes its running reduction of chunk (me-s-1) to its
// right neighbour and folds the chunk arriving from its left into its own,
// so after n-1 steps rank me holds chunk me fully reduced.
void reduce_scatter_around(const Run& r, uint8_t* acc, size_t acc_bytes,
                           const std::vector<size_t>& counts,
                           const std::vector<size_t>& offsets, uint32_t step0) {
  const size_t n = static_cast<size_t>(r.n);
  const size_t me = static_cast<size_t>(r.me);
  const size_t largest = largest_of(counts);
  uint8_t* const incoming = r.scratch.get(0, largest * r.es);
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* acc_buf = t.buffer(acc, acc_bytes);
  auto* in_buf = t.buffer(incoming, largest * r.es);
  const ReduceOp op = partial_op(r.a.op);
  for (size_t s = 0; s + 1 < n; ++s) {
    // Each step has its own slot, so a fast neighbour's next chunk can never
    // land in this step's receive.
    const uint64_t sl = slot(kPayloadPrefix, r.tag, step0 + static_cast<uint32_t>(s));
    const size_t out_idx = (me + 2 * n - s - 1) % n;
    const size_t in_idx = (me + 2 * n - s - 2) % n;
    t.recv(in_buf, r.left(), sl, 0, counts[in_idx] * r.es);
    t.send(acc_buf, r.right(), sl, offsets[out_idx] * r.es, counts[out_idx] * r.es);
    t.wait();
    uint8_t* dst = acc + offsets[in_idx] * r.es;
    core::reduce(dst, dst, incoming, counts[in_idx], r.a.dtype, op);
  }
}

// Ring all-gather over buf, whose chunk `me` is filled: in step s every rank
// passes chunk (me-s) to its right neighbour and receives chunk (me-s-1)
// from its left, in place. Steps before `first` were done by the caller.
void all_gather_around(const Run& r, uint8_t* buf, size_t buf_bytes,
                       const std::vector<size_t>& counts,
                       const std::vector<size_t>& offsets, uint32_t step0,
                       size_t first = 0) {
  const size_t n = static_cast<size_t>(r.n);
  const size_t me = static_cast<size_t>(r.me);
  if (first + 1 >= n) return;
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* b = t.buffer(buf, buf_bytes);
  for (size_t s = first; s + 1 < n; ++s) {
    const uint64_t sl = slot(kPayloadPrefix, r.tag, step0 + static_cast<uint32_t>(s));
    const size_t out_idx = (me + n - s) % n;
    const size_t in_idx = (me + 2 * n - s - 1) % n;
    t.recv(b, r.left(), sl, offsets[in_idx] * r.es, counts[in_idx] * r.es);
    t.send(b, r.right(), sl, offsets[out_idx] * r.es, counts[out_idx] * r.es);
    t.wait();
  }
}

void ring_all_reduce(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  agree(r, r.neighbours());
  if (r.a.send != r.a.recv) copy_bytes(r.a.recv, r.a.send, bytes);
  const auto counts = even_chunks(r.a.count, r.n);
  const auto offsets = core::prefix_offsets(counts);
  reduce_scatter_around(r, bytes_of(r.a.recv), bytes, counts, offsets, 0);
  if (r.a.op == ReduceOp::kAvg) {
    core::finish_avg(bytes_of(r.a.recv) + offsets[static_cast<size_t>(r.me)] * r.es,
                     counts[static_cast<size_t>(r.me)], r.a.dtype, r.n);
  }
  all_gather_around(r, bytes_of(r.a.recv), bytes, counts, offsets,
                    static_cast<uint32_t>(r.n));
}

// Reduce-scatter around the ring, then every rank hands its chunk to the
// root.
void ring_reduce(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  agree(r, merged(r.neighbours(), r.rooted()));
  uint8_t* const acc = r.scratch.get(1, bytes);
  copy_bytes(acc, r.a.send, bytes);
  const auto counts = even_chunks(r.a.count, r.n);
  const auto offsets = core::prefix_offsets(counts);
  reduce_scatter_around(r, acc, bytes, counts, offsets, 0);
  const size_t me = static_cast<size_t>(r.me);
  Transfers t(r.ctx, r.waits, r.op.deadline);
  const uint64_t sl = slot(kPayloadPrefix, r.tag, static_cast<uint32_t>(r.n));
  if (r.me == r.a.root) {
    auto* out = t.buffer(r.a.recv, bytes);
    copy_bytes(bytes_of(r.a.recv) + offsets[me] * r.es,
                acc + offsets[me] * r.es, counts[me] * r.es);
    for (int p : r.everyone_else()) {
      const auto i = static_cast<size_t>(p);
      t.recv(out, p, sl, offsets[i] * r.es, counts[i] * r.es);
    }
    t.wait();
    if (r.a.op == ReduceOp::kAvg) {
      core::finish_avg(r.a.recv, r.a.count, r.a.dtype, r.n);
    }
  } else {
    auto* in = t.buffer(acc, bytes);
    t.send(in, r.a.root, sl, offsets[me] * r.es, counts[me] * r.es);
    t.wait();
  }
}

// The root scatters chunks, then a ring all-gather completes them.
void ring_broadcast(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  agree(r, merged(r.neighbours(), r.rooted()));
  const auto counts = even_chunks(r.a.count, r.n);
  const auto offsets = core::prefix_offsets(counts);
  {
    Transfers t(r.ctx, r.waits, r.op.deadline);
    const uint64_t sl = slot(kPayloadPrefix, r.tag, 0);
    auto* b = t.buffer(r.a.recv, bytes);
    for (int p : r.rooted()) {
      const auto i = static_cast<size_t>(root ? p : r.me);
      if (root) {
        t.send(b, p, sl, offsets[i] * r.es, counts[i] * r.es);
      } else {
        t.recv(b, p, sl, offsets[i] * r.es, counts[i] * r.es);
      }
    }
    t.wait();
  }
  all_gather_around(r, bytes_of(r.a.recv), bytes, counts, offsets, 1);
}

// all_gather and all_gatherv: counts per rank (elements).
void ring_all_gather(const Run& r, const std::vector<size_t>& counts) {
  const auto offsets = core::prefix_offsets(counts);
  const size_t total = total_of(counts);
  const size_t me = static_cast<size_t>(r.me);
  uint8_t* out = place_own_block(r, counts, offsets);
  {
    // The ring's first step (this rank's own block out, its left
    // neighbour's in) goes with the frames.
    const size_t from_left = static_cast<size_t>(r.left());
    Transfers t(r.ctx, r.waits, r.op.deadline);
    auto* b = t.buffer(out, total * r.es);
    post_early(t, b, false, r.left(), r.tag, offsets[from_left] * r.es,
               counts[from_left] * r.es);
    post_early(t, b, true, r.right(), r.tag, offsets[me] * r.es, counts[me] * r.es);
    agree(r, r.neighbours());
    t.wait();
  }
  all_gather_around(r, out, total * r.es, counts, offsets, 0, 1);
}

// reduce_scatter and reduce_scatterv.
void ring_reduce_scatter(const Run& r) {
  const size_t n = static_cast<size_t>(r.n);
  std::vector<size_t> counts = r.a.recv_counts;
  if (r.a.kind == OpKind::kReduceScatter) counts.assign(n, r.a.count);
  const auto offsets = core::prefix_offsets(counts);
  const size_t total = total_of(counts);
  agree(r, r.neighbours());
  const size_t me = static_cast<size_t>(r.me);
  uint8_t* const acc = r.scratch.get(1, total * r.es);
  copy_bytes(acc, r.a.send, total * r.es);
  reduce_scatter_around(r, acc, total * r.es, counts, offsets, 0);
  move_bytes(r.a.recv, acc + offsets[me] * r.es, counts[me] * r.es);
  if (r.a.op == ReduceOp::kAvg) {
    core::finish_avg(r.a.recv, counts[me], r.a.dtype, r.n);
  }
}

// A binomial tree from the root: ceil(log2 n) steps of the whole buffer,
// each rank receiving once and then sending to its children (the root to
// at most log2 n of them). Against the scatter and ring it takes fewer,
// larger steps, which is what few ranks on few cores want.
void tree_broadcast(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  const int vr = (r.me - r.a.root + r.n) % r.n;  // rank relative to the root
  auto real = [&](int v) { return (v + r.a.root) % r.n; };
  int parent = -1;
  std::vector<int> children;
  int mask = 1;
  while (mask < r.n) {
    if (vr & mask) {
      parent = real(vr - mask);
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < r.n) children.push_back(real(vr + mask));
  }
  std::vector<int> partners = children;
  if (parent >= 0) partners.push_back(parent);
  std::sort(partners.begin(), partners.end());
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* b = t.buffer(r.a.recv, bytes);
  if (root) {
    for (int c : children) post_early(t, b, true, c, r.tag, 0, bytes);
    agree(r, partners);
  } else {
    post_early(t, b, false, parent, r.tag, 0, bytes);
    agree(r, partners);
    t.wait();
    for (int c : children) post_early(t, b, true, c, r.tag, 0, bytes);
  }
  t.wait();
}

// In round k every rank exchanges frames with the ranks 2^k ahead and
// behind; after ceil(log2 n) rounds every rank has heard, through others,
// from all, and has connected to 2 log2 n peers.
void dissemination_barrier(const Run& r) {
  uint32_t round = 0;
  for (int d = 1; d < r.n; d *= 2, ++round) {
    const std::vector<int> partners =
        merged({(r.me + d) % r.n}, {(r.me + r.n - d) % r.n});
    std::vector<Frame> out(static_cast<size_t>(r.n)), in(static_cast<size_t>(r.n));
    for (int p : partners) out[static_cast<size_t>(p)] = make_frame(r.op, 0, 0);
    exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in, round);
  }
}

}  // namespace

uint8_t* Scratch::get(int part, size_t bytes) {
  const auto i = static_cast<size_t>(part);
  if (bytes > cap_[i]) {
    buf_[i].reset();  // the old block goes before the new one comes
    buf_[i].reset(new uint8_t[bytes]);
    cap_[i] = bytes;
  }
  return buf_[i].get();
}

namespace {

// The automatic choice's thresholds (GANG_GLOO_ALGORITHM=auto). "bytes" is
// what one rank sends to one peer (its whole input, or its largest block),
// "n" the gang's size; the runs behind the values are in docs/benchmarks.md
// (the gloo thresholds).
//
//   kDirectBytes        256 KiB  broadcast, all-gather and reduce exchange
//                                whole buffers in one round while
//                                bytes x (n-1) is at most this: one hop
//                                instead of 2(n-1) dependent ones.
//   kDirectRanks        8        a gang larger than this never has every
//                                rank talk to every other (pairs connect on
//                                first use, gloo_pairs.h; a ring or a
//                                dissemination keeps each rank's connections
//                                few), nor runs the tree broadcast.
//   kDirectReduceBytes  1 MiB    all-reduce on 3 to kDirectRanks ranks: the
//                                direct exchange while bytes x (n-1) is at
//                                most this, the ring above.
//   kTwoRankRingBytes   1 MiB    all-reduce on 2 ranks: the direct exchange
//                                below this, the ring from it (both move
//                                the same; the ring reduces half the buffer
//                                on each rank, the direct exchange all of it,
//                                in one step instead of two).
constexpr size_t kDirectBytes = 256 * 1024;
constexpr int kDirectRanks = 8;
constexpr size_t kDirectReduceBytes = 1024 * 1024;
constexpr size_t kTwoRankRingBytes = 1024 * 1024;

// What the frames of a collective with one algorithm carry: the value the
// frames had before any collective had a choice.
constexpr Algorithm kOnlyOne = Algorithm::kRing;

// What runs, by collective, under auto ("bytes" and "n" as above):
//
//   all-reduce     direct  n == 2 and bytes < kTwoRankRingBytes, or
//                          3 <= n <= kDirectRanks and bytes x (n-1) <=
//                          kDirectReduceBytes
//                  ring    otherwise
//   broadcast      direct  n == 2, or bytes x (n-1) <= kDirectBytes
//                  tree    otherwise, n <= kDirectRanks
//                  ring    otherwise (the root scatters, a ring all-gather)
//   all-gather(v)  direct  n <= kDirectRanks, the largest block x (n-1) <=
//                          kDirectBytes and all blocks <= 4 kDirectBytes
//                  ring    otherwise
//   reduce         direct  bytes x (n-1) <= kDirectBytes
//                  ring    otherwise
//   barrier        direct  n <= kDirectRanks
//                  dissemination otherwise
//   gather, scatter, all-to-all(v): direct; reduce-scatter(v): ring.
//
// GANG_GLOO_ALGORITHM=direct|ring|tree forces one of all-reduce's,
// broadcast's and all-gather's where it applies (direct and tree on gangs
// of up to kDirectRanks; else the ring); reduce and barrier go by the
// table whatever it says.

// Whether `candidate` (direct or tree) runs when `asked` is
// GANG_GLOO_ALGORITHM: auto takes it when `by_size`.
bool takes(Algorithm asked, Algorithm candidate, bool by_size, int n) {
  if (asked == Algorithm::kAuto) return by_size;
  return asked == candidate && n <= kDirectRanks;
}

Algorithm all_reduce_algorithm(Algorithm asked, int n, size_t bytes) {
  const size_t peers = static_cast<size_t>(n - 1);
  const bool small = n == 2 ? bytes < kTwoRankRingBytes
                            : n <= kDirectRanks && bytes * peers <= kDirectReduceBytes;
  return takes(asked, Algorithm::kDirect, small, n) ? Algorithm::kDirect : Algorithm::kRing;
}

// On 2 ranks the direct broadcast moves what the others would, in one step.
Algorithm broadcast_algorithm(Algorithm asked, int n, size_t bytes) {
  const size_t peers = static_cast<size_t>(n - 1);
  if (takes(asked, Algorithm::kDirect, n == 2 || bytes * peers <= kDirectBytes, n)) {
    return Algorithm::kDirect;
  }
  if (takes(asked, Algorithm::kTree, n <= kDirectRanks, n)) return Algorithm::kTree;
  return Algorithm::kRing;
}

// From the counts, which every rank has, never from this rank's own block.
Algorithm all_gather_algorithm(Algorithm asked, int n, const std::vector<size_t>& counts,
                               size_t es) {
  const size_t peers = static_cast<size_t>(n - 1);
  const bool small = n <= kDirectRanks && largest_of(counts) * es * peers <= kDirectBytes &&
                     total_of(counts) * es <= 4 * kDirectBytes;
  return takes(asked, Algorithm::kDirect, small, n) ? Algorithm::kDirect : Algorithm::kRing;
}

Algorithm reduce_algorithm(int n, size_t bytes) {
  return bytes * static_cast<size_t>(n - 1) <= kDirectBytes ? Algorithm::kDirect
                                                            : Algorithm::kRing;
}

}  // namespace

void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const std::shared_ptr<Waits>& waits, Scratch& scratch,
                    Algorithm algorithm, const core::Operation& op) {
  const CollectiveArgs& a = op.args;
  const int n = ctx->size;
  const size_t es = core::dtype_size(a.dtype);
  const size_t bytes = a.count * es;
  const auto run = [&](Algorithm chosen) { return Run(ctx, waits, scratch, op, chosen); };
  switch (a.kind) {
    case OpKind::kAllReduce:
      return all_reduce_algorithm(algorithm, n, bytes) == Algorithm::kDirect
                 ? direct_all_reduce(run(Algorithm::kDirect))
                 : ring_all_reduce(run(Algorithm::kRing));
    case OpKind::kReduce:
      return reduce_algorithm(n, bytes) == Algorithm::kDirect
                 ? direct_reduce(run(Algorithm::kDirect))
                 : ring_reduce(run(Algorithm::kRing));
    case OpKind::kBroadcast:
      switch (broadcast_algorithm(algorithm, n, bytes)) {
        case Algorithm::kDirect:
          return direct_broadcast(run(Algorithm::kDirect));
        case Algorithm::kTree:
          return tree_broadcast(run(Algorithm::kTree));
        default:
          return ring_broadcast(run(Algorithm::kRing));
      }
    case OpKind::kAllGather:
    case OpKind::kAllGatherV: {
      std::vector<size_t> even;
      if (a.kind == OpKind::kAllGather) even.assign(static_cast<size_t>(n), a.count);
      const std::vector<size_t>& counts = a.kind == OpKind::kAllGather ? even : a.recv_counts;
      return all_gather_algorithm(algorithm, n, counts, es) == Algorithm::kDirect
                 ? direct_all_gather(run(Algorithm::kDirect), counts)
                 : ring_all_gather(run(Algorithm::kRing), counts);
    }
    case OpKind::kGather:
      return direct_gather(run(kOnlyOne));
    case OpKind::kScatter:
      return direct_scatter(run(kOnlyOne));
    case OpKind::kReduceScatter:
    case OpKind::kReduceScatterV:
      return ring_reduce_scatter(run(kOnlyOne));
    case OpKind::kAllToAll: {
      const std::vector<size_t> same(static_cast<size_t>(n), a.count);
      return direct_all_to_all(run(kOnlyOne), same, same);
    }
    case OpKind::kAllToAllV:
      return direct_all_to_all(run(kOnlyOne), a.send_counts, a.recv_counts);
    case OpKind::kBarrier:
      return n <= kDirectRanks ? direct_barrier(run(kOnlyOne))
                               : dissemination_barrier(run(kOnlyOne));
    case OpKind::kSend:
    case OpKind::kRecv:
      break;
  }
  fail(Status::kInternal, core::op_api_name(a.kind), " reached the collective path");
}

Algorithm algorithm_from_env() {
  const char* v = base::env("GANG_GLOO_ALGORITHM");
  if (v == nullptr || std::strcmp(v, "auto") == 0) return Algorithm::kAuto;
  if (std::strcmp(v, "direct") == 0) return Algorithm::kDirect;
  if (std::strcmp(v, "ring") == 0) return Algorithm::kRing;
  if (std::strcmp(v, "tree") == 0) return Algorithm::kTree;
  fail(Status::kInvalidArgument, "GANG_GLOO_ALGORITHM is \"", v,
       "\": it must be auto, direct, ring or tree");
}

uint32_t wire_tag(const core::Operation& op) {
  // 16 bits (gloo_frames.h): a rank is never 2^14 operations of one
  // channel ahead of a peer it shares a transfer with.
  return (static_cast<uint32_t>(op.seq) & 0x3fffu) |
         (static_cast<uint32_t>(op.channel) << 14);
}

}  // namespace gang::backends::gloo_impl
