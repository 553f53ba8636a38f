// What gang's algorithms over Gloo share: one operation on one rank (Run),
// the slots their payloads travel on, the frames' agreement and the
// arithmetic of counts and chunks.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/gloo/gloo_collectives.h"
#include "backends/gloo/gloo_frames.h"
#include "core/backend.h"
#include "core/collective.h"

namespace gang::backends::gloo_impl {

// Slot prefixes (the top byte of a slot): each kind of traffic has its own,
// so a frame never meets a payload and a user's tag never meets a
// collective's sequence number. The collectives' payloads here; frames
// 0x44 (gloo_frames.cc); point-to-point 0x40, 0x43, 0x46, 0x47
// (gloo_p2p.cc).
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

// One operation on one rank: its context, identity and deadline.
struct Run {
  const std::shared_ptr<::gloo::Context>& ctx;
  const std::shared_ptr<Waits>& waits;
  Scratch& scratch;
  const core::Operation& op;
  const core::CollectiveArgs& a;
  uint32_t tag;
  int n;
  int me;
  size_t es;

  // The algorithm this operation runs, chosen by the dispatch
  // (gloo_dispatch.cc) from facts every rank has (the counts, the gang's
  // size, GANG_GLOO_ALGORITHM), never from a rank's own block: the frames
  // carry it and agree() compares.
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

// Posts [offset, offset + n) of b to (send) or from `peer` on early slots.
void post_early(Transfers& t, ::gloo::transport::UnboundBuffer* b, bool send,
                int peer, uint32_t tag, size_t offset, size_t n);

inline uint8_t* bytes_of(void* p) { return static_cast<uint8_t*>(p); }
inline const uint8_t* bytes_of(const void* p) { return static_cast<const uint8_t*>(p); }

// Agrees with `partners` on the operation (see gloo_frames.h), and on the
// algorithm (a rank that chose another fails with kInternal). to_you and
// from_you give, per rank, the bytes this rank sends it and expects from it
// (0 for the uniform collectives, whose sizes follow from the counts).
// `inline_out` (per rank, may be null) rides in the frames when it fits;
// returns the frames received.
class Agreed;
// `step` tells apart the agreements of an operation that has several.
Agreed agree(const Run& r, const std::vector<int>& partners,
                         const std::vector<uint64_t>* to_you = nullptr,
                         const std::vector<uint64_t>* from_you = nullptr,
                         const std::vector<const void*>* inline_out = nullptr,
                         size_t inline_len = 0, uint32_t step = 0);

// The agreement of an operation the root sends to all (broadcast,
// scatter) without a frame from every rank into the root: the root sends
// its frame (with its inline_out for that rank, when it fits) to every
// rank, every other rank sends its own to the rank on its right, and each
// rank checks the frame from the rank on its left, then, if that is not
// the root, the root's. Ranks that disagree (on the root too) differ
// somewhere around the ring, and the rank right of there fails at once;
// its closed connections end the others' waits. The root receives one
// frame instead of n - 1. Returns the frames received: from the left, and
// from the root.
Agreed agree_from_root(const Run& r, const std::vector<const void*>* inline_out = nullptr,
                       size_t inline_len = 0);

// The frames agree() received, one per partner: what an agreement with a
// few partners of a wide gang holds is as small as those few.
class Agreed {
 public:
  Agreed(std::vector<int> partners, std::vector<Frame> frames);
  // The frame from `rank`, one of the partners.
  const Frame& from(int rank) const;

 private:
  std::vector<int> partners_;
  std::vector<Frame> frames_;
  bool sorted_;
};

// The same block at `data` for every partner (agree's inline_out).
std::vector<const void*> same_for_all(const Run& r, const void* data);

// The reduction of partial results: a sum where the operation averages
// (the division comes last, core::finish_avg).
inline core::ReduceOp partial_op(core::ReduceOp op) {
  return op == core::ReduceOp::kAvg ? core::ReduceOp::kSum : op;
}

// ceil(log2 n): the rounds of a log-round algorithm on n ranks.
inline int rounds_of(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// The largest power of two up to n: the ranks recursive doubling swaps
// among, the others folding into them.
inline int doubling_ranks(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// `count` elements split into n nearly equal chunks.
std::vector<size_t> even_chunks(size_t count, int n);
size_t total_of(const std::vector<size_t>& counts);
size_t largest_of(const std::vector<size_t>& counts);

// An all-gather's own block (counts and offsets per rank, in elements)
// moved into its place in the output, which it returns.
uint8_t* place_own_block(const Run& r, const std::vector<size_t>& counts,
                         const std::vector<size_t>& offsets);

// a and b together, sorted, each rank once.
std::vector<int> merged(std::vector<int> a, const std::vector<int>& b);

// "direct", "ring", ... for messages.
const char* algorithm_name(Algorithm a);

}  // namespace gang::backends::gloo_impl
