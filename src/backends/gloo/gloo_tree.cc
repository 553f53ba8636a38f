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
  const int p = doubling_ranks(r.n);
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

// The doubling all-reduce's exchanges without the data: the ranks from p
// on check in with the rank p below them, the first p swap frames with
// rank me ^ 2^k in round k, and the folded ranks are let go at the end.
// log2 p + 2 exchanges of one frame, and a rank connects to log2 p peers
// (and one more when it folds or is folded into): the peers the doubling
// all-reduce and the binomial tree from rank 0 talk to, where the
// dissemination connected each rank to 2 log2 n ranks that nothing else
// uses.
void doubling_barrier(const Run& r) {
  const int p = doubling_ranks(r.n);
  const auto rounds = static_cast<uint32_t>(rounds_of(p));
  const uint32_t last = rounds + 1;
  if (r.me >= p) {
    agree(r, {r.me - p});
    agree(r, {r.me - p}, nullptr, nullptr, nullptr, 0, last);
    return;
  }
  const bool takes_one = r.me + p < r.n;
  if (takes_one) agree(r, {r.me + p});
  for (uint32_t k = 0; k < rounds; ++k) {
    agree(r, {r.me ^ (1 << k)}, nullptr, nullptr, nullptr, 0, k + 1);
  }
  if (takes_one) agree(r, {r.me + p}, nullptr, nullptr, nullptr, 0, last);
}

}  // namespace gang::backends::gloo_impl
