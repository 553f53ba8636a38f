// The ring algorithms: a reduce-scatter and an all-gather around the ring,
// and the collectives built on them (gloo_algorithms.h).
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

}  // namespace

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

void ring_reduce_scatter(const Run& r, const std::vector<size_t>& counts) {
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

}  // namespace gang::backends::gloo_impl
