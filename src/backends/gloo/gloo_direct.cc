// The direct algorithms: every rank exchanges with every other (or the
// root with each) in one step (gloo_algorithms.h).
#include <cstdint>
#include <vector>

#include "backends/gloo/gloo_algorithms.h"
#include "base/copy.h"
#include "core/reduce.h"

namespace gang::backends::gloo_impl {

using base::copy_bytes;
using base::move_bytes;
using core::ReduceOp;

namespace {

// recv = the n ranks' inputs reduced in rank order, so every rank computes
// the same bits, then divided where the operation averages. `own` is this
// rank's input and `theirs(p)` rank p's. From rank 2 on the first partial
// results would overwrite `own` where recv overlaps it: a copy is read then.
template <typename Theirs>
void reduce_in_rank_order(const Run& r, void* recv, const uint8_t* own, size_t count,
                          Theirs theirs) {
  const size_t me = static_cast<size_t>(r.me);
  const size_t bytes = count * r.es;
  const uint8_t* out = bytes_of(recv);
  if (me >= 2 && out < own + bytes && own < out + bytes) {
    uint8_t* copy = r.scratch.get(1, bytes);
    copy_bytes(copy, own, bytes);
    own = copy;
  }
  auto input = [&](size_t p) { return p == me ? own : theirs(p); };
  const ReduceOp op = partial_op(r.a.op);
  core::reduce(recv, input(0), input(1), count, r.a.dtype, op);
  for (size_t p = 2; p < static_cast<size_t>(r.n); ++p) {
    core::reduce(recv, recv, input(p), count, r.a.dtype, op);
  }
  if (r.a.op == ReduceOp::kAvg) core::finish_avg(recv, count, r.a.dtype, r.n);
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
    const Agreed in = agree(r, partners, nullptr, nullptr, &mine, bytes);
    if (!receives) return;  // the frame carried it
    for (int p : partners) {
      copy_bytes(all + slot_of(static_cast<size_t>(p)),
                  in.from(p).data, bytes);
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
  reduce_in_rank_order(r, recv, bytes_of(send), r.a.count,
                       [&](size_t p) { return all + slot_of(p); });
}

}  // namespace

void direct_all_reduce(const Run& r) { direct_reduce_to(r, -1); }

void direct_reduce(const Run& r) { direct_reduce_to(r, r.a.root); }

// Each rank sends every peer that peer's block and reduces the n blocks of
// its own in rank order, so the result has the same bits on every rank
// that could compute it. Uniform blocks that fit ride in the frames.
void direct_reduce_scatter(const Run& r, const std::vector<size_t>& counts) {
  const size_t n = static_cast<size_t>(r.n);
  const size_t me = static_cast<size_t>(r.me);
  const auto offsets = core::prefix_offsets(counts);
  const size_t mine = counts[me] * r.es;
  const uint8_t* const send = bytes_of(r.a.send);
  // The peers' blocks for this rank (rank p at slot p, or p - 1 above it).
  uint8_t* const theirs = r.scratch.get(0, (n - 1) * mine);
  auto slot_of = [&](size_t p) { return (p < me ? p : p - 1) * mine; };
  const bool uniform = largest_of(counts) == counts[me] && total_of(counts) == n * counts[me];
  if (uniform && mine <= kInlineBytes) {
    std::vector<const void*> blocks(n);
    for (size_t p = 0; p < n; ++p) blocks[p] = send + offsets[p] * r.es;
    const Agreed in = agree(r, r.everyone_else(), nullptr, nullptr, &blocks, mine);
    for (int p : r.everyone_else()) {
      copy_bytes(theirs + slot_of(static_cast<size_t>(p)), in.from(p).data,
                 mine);
    }
  } else {
    Transfers t(r.ctx, r.waits, r.op.deadline);
    auto* out = t.buffer(send, total_of(counts) * r.es);
    auto* in = t.buffer(theirs, (n - 1) * mine);
    for (int p : r.everyone_else()) {
      const auto i = static_cast<size_t>(p);
      post_early(t, in, false, p, r.tag, slot_of(i), mine);
      post_early(t, out, true, p, r.tag, offsets[i] * r.es, counts[i] * r.es);
    }
    agree(r, r.everyone_else());
    t.wait();
  }
  if (mine == 0) return;
  reduce_in_rank_order(r, r.a.recv, send + offsets[me] * r.es, counts[me],
                       [&](size_t p) { return theirs + slot_of(p); });
}

void direct_broadcast(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  const bool root = r.me == r.a.root;
  const bool fits = bytes <= kInlineBytes;
  if (fits) {
    const auto mine = same_for_all(r, r.a.recv);
    const auto in = agree_from_root(r, root ? &mine : nullptr, bytes);
    if (!root) copy_bytes(r.a.recv, in.from(r.a.root).data, bytes);
    return;
  }
  Transfers t(r.ctx, r.waits, r.op.deadline);
  auto* b = t.buffer(r.a.recv, bytes);
  for (int p : r.rooted()) post_early(t, b, root, p, r.tag, 0, bytes);
  agree_from_root(r);
  t.wait();
}

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
      copy_bytes(out + offsets[i] * r.es, in.from(p).data, counts[i] * r.es);
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
                    in.from(p).data, bytes);
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
  const auto in = agree_from_root(r, fits && root ? &chunks : nullptr, bytes);
  if (root) {
    const size_t me = static_cast<size_t>(r.me);
    const uint8_t* own = bytes_of(r.a.send) + me * bytes;
    if (r.a.recv != own) move_bytes(r.a.recv, own, bytes);
  } else if (fits) {
    copy_bytes(r.a.recv, in.from(r.a.root).data, bytes);
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

void direct_barrier(const Run& r) { agree(r, r.everyone_else()); }

}  // namespace gang::backends::gloo_impl
