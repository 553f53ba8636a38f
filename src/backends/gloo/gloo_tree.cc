// The log-round algorithms: ceil(log2 n) rounds, each rank talking to a
// few others in each (gloo_algorithms.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/gloo/gloo_algorithms.h"

namespace gang::backends::gloo_impl {

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
    std::vector<Frame> out(partners.size(), make_frame(r.op, 0, 0)), in(partners.size());
    exchange_frames(r.ctx, r.waits, r.op.deadline, r.tag, partners, out, in, round);
  }
}

}  // namespace gang::backends::gloo_impl
