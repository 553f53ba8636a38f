// The log-round algorithms: ceil(log2 n) rounds, each rank talking to a
// few others in each (gloo_algorithms.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/gloo/gloo_algorithms.h"
#include "base/copy.h"
#include "core/reduce.h"

namespace gang::backends::gloo_impl {

using base::copy_bytes;
using base::move_bytes;

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

// The largest power of two p <= n folds the ranks from p on into the ranks
// p below them (rank p + i's input to rank i, reduced there), then in round
// k each rank of the first p swaps its partial with rank me ^ 2^k, and at
// the end each folded rank gets the result back: log2 p + 2 exchanges of
// one frame, against 2(n - 1) steps of the ring. Each pair reduces the
// lower rank's partial first, so both compute the same bits, and every rank
// ends with the same bits.
void doubling_all_reduce(const Run& r) {
  const size_t bytes = r.a.count * r.es;
  uint8_t* const acc = bytes_of(r.a.recv);
  if (r.a.send != r.a.recv) move_bytes(acc, r.a.send, bytes);
  int p = 1;
  while (p * 2 <= r.n) p *= 2;
  const auto rounds = static_cast<uint32_t>(rounds_of(p));
  const uint32_t last = rounds + 1;  // the step that gives folded ranks the result
  const auto mine = same_for_all(r, acc);
  const core::ReduceOp op = partial_op(r.a.op);
  if (r.me >= p) {  // folded: its input to rank me - p, the result back
    agree(r, {r.me - p}, nullptr, nullptr, &mine, bytes, 0);
    const Agreed in = agree(r, {r.me - p}, nullptr, nullptr, nullptr, 0, last);
    copy_bytes(acc, in.from(r.me - p).data, bytes);
    return;
  }
  const bool takes_one = r.me + p < r.n;
  if (takes_one) {
    const Agreed in = agree(r, {r.me + p}, nullptr, nullptr, &mine, bytes, 0);
    core::reduce(acc, acc, in.from(r.me + p).data, r.a.count, r.a.dtype, op);
  }
  for (uint32_t k = 0; k < rounds; ++k) {
    const int peer = r.me ^ (1 << k);
    const Agreed in = agree(r, {peer}, nullptr, nullptr, &mine, bytes, k + 1);
    const uint8_t* theirs = in.from(peer).data;
    if (r.me < peer) {
      core::reduce(acc, acc, theirs, r.a.count, r.a.dtype, op);
    } else {
      core::reduce(acc, theirs, acc, r.a.count, r.a.dtype, op);
    }
  }
  if (r.a.op == core::ReduceOp::kAvg) core::finish_avg(acc, r.a.count, r.a.dtype, r.n);
  if (takes_one) agree(r, {r.me + p}, nullptr, nullptr, &mine, bytes, last);
}

// In round k every rank exchanges frames with the ranks 2^k ahead and
// behind; after ceil(log2 n) rounds every rank has heard, through others,
// from all, and has connected to 2 log2 n peers.
void dissemination_barrier(const Run& r) {
  uint32_t round = 0;
  for (int d = 1; d < r.n; d *= 2, ++round) {
    const std::vector<int> partners =
        merged({(r.me + d) % r.n}, {(r.me + r.n - d) % r.n});
    std::vector<Frame> out(partners.size(), make_frame(r.op, 0, 0)), in(partners.size());
    exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in, round);
  }
}

}  // namespace gang::backends::gloo_impl
