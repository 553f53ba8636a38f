// Which algorithm each collective runs (gloo_algorithms.h), chosen from
// facts every rank has: the counts, the gang's size and GANG_GLOO_ALGORITHM.
#include <cstring>
#include <vector>

#include "backends/gloo/gloo_algorithms.h"
#include "backends/gloo/gloo_collectives.h"
#include "base/env.h"
#include "base/error.h"
#include "core/collective.h"

namespace gang::backends::gloo_impl {

using core::CollectiveArgs;
using core::OpKind;

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
//   kDirectRanks        8        the algorithms where every rank talks to
//                                every other, and the tree, are for gangs
//                                of up to this many: above it pairs connect
//                                on first use (gloo_pairs.h), and a ring or
//                                recursive doubling keeps each rank's
//                                connections few.
//   kDirectReduceBytes  1 MiB    all-reduce on 3 to kDirectRanks ranks: the
//                                direct exchange while bytes x (n-1) is at
//                                most this, the ring above.
//   kTwoRankRingBytes   1 MiB    all-reduce on 2 ranks: the direct exchange
//                                below this, the ring from it (both move
//                                the same; the ring reduces half the buffer
//                                on each rank, the direct exchange all of it,
//                                in one step instead of two).
//   kStepBytes          320 KiB  broadcast above kDirectRanks: what a link
//                                moves in the time one step's latency takes
//                                (tree_beats_ring).
constexpr size_t kDirectBytes = 256 * 1024;
constexpr int kDirectRanks = 8;
constexpr size_t kDirectReduceBytes = 1024 * 1024;
constexpr size_t kTwoRankRingBytes = 1024 * 1024;
constexpr size_t kStepBytes = 320 * 1024;

// What the frames of a collective with one algorithm carry: the value the
// frames had before any collective had a choice.
constexpr Algorithm kOnlyOne = Algorithm::kRing;

// What runs, by collective, under auto ("bytes" and "n" as above):
//
//   all-reduce     direct  n == 2 and bytes < kTwoRankRingBytes, or
//                          3 <= n <= kDirectRanks and bytes x (n-1) <=
//                          kDirectReduceBytes
//                  doubling n > kDirectRanks and bytes <= kInlineBytes
//                          (a frame's payload)
//                  ring    otherwise
//   broadcast      direct  n == 2, or bytes x (n-1) <= kDirectBytes
//                  tree    otherwise, n <= kDirectRanks or tree_beats_ring
//                  ring    otherwise (the root scatters, a ring all-gather)
//   all-gather(v)  direct  n <= kDirectRanks, the largest block x (n-1) <=
//   reduce-scatter(v)      kDirectBytes and all blocks <= 4 kDirectBytes
//                  ring    otherwise
//   reduce         direct  bytes x (n-1) <= kDirectBytes
//                  ring    otherwise
//   barrier        direct  n <= kDirectRanks
//                  doubling otherwise
//   gather, scatter, all-to-all(v): direct.
//
// GANG_GLOO_ALGORITHM=direct|ring|tree forces one of all-reduce's,
// broadcast's, all-gather's and reduce-scatter's where it applies (direct
// on gangs of up to kDirectRanks, else the ring); reduce and barrier go by
// the table whatever it says.

// Whether `candidate` (direct or tree) runs when `asked` is
// GANG_GLOO_ALGORITHM: auto takes it when `by_size`.
bool takes(Algorithm asked, Algorithm candidate, bool by_size, int n) {
  if (asked == Algorithm::kAuto) return by_size;
  return asked == candidate && (candidate == Algorithm::kTree || n <= kDirectRanks);
}

// A broadcast on more than kDirectRanks: the binomial tree takes
// k = ceil(log2 n) steps of the whole buffer B, the scatter and ring
// all-gather 2(n-1) steps of B/n. With a step's latency L and a link's
// bandwidth W the tree takes k (L + B/W), the ring about 2(n-1) L + 2B/W:
// the tree is the faster while B (k - 2) < L W (2(n-1) - k). L W is
// kStepBytes, fitted to where the two crossed on 16 ranks of a 16-core
// machine (the ring 1.65 times the tree's time at 2 MiB, 0.64-0.85 from
// 8 MiB: about 4 MiB); so 4 MiB on 16 ranks, 6 MiB on 32, 10 MiB on 64.
bool tree_beats_ring(int n, size_t bytes) {
  const int k = rounds_of(n);
  if (k <= 2) return true;
  return bytes * static_cast<size_t>(k - 2) <
         kStepBytes * static_cast<size_t>(2 * (n - 1) - k);
}

Algorithm all_reduce_algorithm(Algorithm asked, int n, size_t bytes) {
  if (asked == Algorithm::kAuto && n > kDirectRanks && bytes <= kInlineBytes) {
    return Algorithm::kDoubling;
  }
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
  if (takes(asked, Algorithm::kTree, n <= kDirectRanks || tree_beats_ring(n, bytes), n)) {
    return Algorithm::kTree;
  }
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

// Each rank's block (elements) of an all-gather(v) or reduce-scatter(v):
// the counts of a v-collective, else `count` each.
std::vector<size_t> blocks_of(const CollectiveArgs& a, int n) {
  const bool v = a.kind == OpKind::kAllGatherV || a.kind == OpKind::kReduceScatterV;
  return v ? a.recv_counts : std::vector<size_t>(static_cast<size_t>(n), a.count);
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
      switch (all_reduce_algorithm(algorithm, n, bytes)) {
        case Algorithm::kDirect:
          return direct_all_reduce(run(Algorithm::kDirect));
        case Algorithm::kDoubling:
          return doubling_all_reduce(run(Algorithm::kDoubling));
        default:
          return ring_all_reduce(run(Algorithm::kRing));
      }
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
      const std::vector<size_t> counts = blocks_of(a, n);
      return all_gather_algorithm(algorithm, n, counts, es) == Algorithm::kDirect
                 ? direct_all_gather(run(Algorithm::kDirect), counts)
                 : ring_all_gather(run(Algorithm::kRing), counts);
    }
    case OpKind::kGather:
      return direct_gather(run(kOnlyOne));
    case OpKind::kScatter:
      return direct_scatter(run(kOnlyOne));
    case OpKind::kReduceScatter:
    case OpKind::kReduceScatterV: {
      const std::vector<size_t> counts = blocks_of(a, n);
      // The same rule as the all-gather's: the same blocks travel.
      return all_gather_algorithm(algorithm, n, counts, es) == Algorithm::kDirect
                 ? direct_reduce_scatter(run(Algorithm::kDirect), counts)
                 : ring_reduce_scatter(run(Algorithm::kRing), counts);
    }
    case OpKind::kAllToAll: {
      const std::vector<size_t> same(static_cast<size_t>(n), a.count);
      return direct_all_to_all(run(kOnlyOne), same, same);
    }
    case OpKind::kAllToAllV:
      return direct_all_to_all(run(kOnlyOne), a.send_counts, a.recv_counts);
    case OpKind::kBarrier:
      return n <= kDirectRanks ? direct_barrier(run(kOnlyOne))
                               : doubling_barrier(run(kOnlyOne));
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
