// CollectiveArgs: one operation, as the core validates it and a backend runs
// it. Every public collective fills one of these and enters the core through
// Gang::issue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/types.h"

namespace gang::core {

enum class OpKind : uint8_t {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kAllGatherV,
  kGather,
  kScatter,
  kReduceScatter,
  kReduceScatterV,
  kAllToAll,
  kAllToAllV,
  kBarrier,
  kSend,
  kRecv,
};

constexpr size_t kNumOpKinds = static_cast<size_t>(OpKind::kRecv) + 1;

// The one table of operations, read by validation, fingerprints, the flight
// recorder, the local (single-process) collectives and the executor.
struct OpInfo {
  const char* api;     // the public function, for messages ("gang_broadcast")
  bool rooted;         // `root` names a rank every rank passes alike
  bool reducing;       // takes a ReduceOp
  bool p2p;            // send or recv: only two ranks take part
  bool vector_counts;  // takes per-rank count arrays
};
// Indexed by OpKind.
inline constexpr OpInfo kOps[] = {
    // api                    rooted reducing p2p    vector_counts
    {"gang_all_reduce",         false, true,  false, false},
    {"gang_reduce",             true,  true,  false, false},
    {"gang_broadcast",          true,  false, false, false},
    {"gang_all_gather",         false, false, false, false},
    {"gang_all_gatherv",        false, false, false, true},
    {"gang_gather",             true,  false, false, false},
    {"gang_scatter",            true,  false, false, false},
    {"gang_reduce_scatter",     false, true,  false, false},
    {"gang_reduce_scatterv",    false, true,  false, true},
    {"gang_all_to_all",         false, false, false, false},
    {"gang_all_to_allv",        false, false, false, true},
    {"gang_barrier",            false, false, false, false},
    {"gang_send",               false, false, true,  false},
    {"gang_recv",               false, false, true,  false},
};
static_assert(sizeof kOps / sizeof kOps[0] == kNumOpKinds, "one row per OpKind");

inline const OpInfo& op_info(OpKind kind) { return kOps[static_cast<size_t>(kind)]; }

inline const char* op_api_name(OpKind kind) { return op_info(kind).api; }
inline bool is_reduction(OpKind kind) { return op_info(kind).reducing; }
inline bool is_p2p(OpKind kind) { return op_info(kind).p2p; }

// The peer of a receive from whichever rank sends first (gang_recv_any).
constexpr int kAnySource = -1;

struct CollectiveArgs {
  OpKind kind = OpKind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  // Elements: the per-rank count (all_reduce, reduce, broadcast, all_gather,
  // gather, scatter), the receive count (reduce_scatter), the count per peer
  // (all_to_all), the message size (send, recv) or the own contribution
  // (all_gatherv).
  size_t count = 0;
  DType dtype = DType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  // root, or the peer of send/recv (kAnySource: any peer)
  int tag = 0;
  // A receive from any peer (root kAnySource) has one: where the sender's
  // rank goes once it completes (the caller's, borrowed like recv). A peer
  // of -1 without it is a bad argument.
  int* source = nullptr;
  // Per-rank counts, copied from the caller so asynchronous operations own
  // them: all_gatherv and reduce_scatterv (recv_counts), all_to_allv (both).
  std::vector<size_t> recv_counts;
  std::vector<size_t> send_counts;
  // A step of a composed operation (a two-level gang's step within a host
  // or among the hosts' leaders): a hash of the signature of the operation
  // it is a step of, never 0; 0 for the caller's own operations. Ranks that
  // run the same step for different operations (the same broadcast within
  // a host for roots on different hosts) disagree here.
  uint64_t outer = 0;
};

// What every rank of a collective must pass alike, as one fixed layout of
// plain integers that travels between ranks as it is: shm's descriptors,
// gloo's frames and the core's debug check all embed it, so a mismatch is
// found by one rule and worded one way whichever backend finds it. Plain
// (trivial) so that it can be copied to and from the wire as bytes; make
// one with of(), or value-initialise it (OpSignature s{}).
struct OpSignature {
  uint8_t kind;   // OpKind
  uint8_t dtype;  // DType
  uint8_t op;     // ReduceOp for reductions, else 0
  uint8_t spare;
  int32_t root;   // rooted: the root; send and recv: the tag; else 0
  // The count every rank passes alike; for all_gatherv and
  // reduce_scatterv this rank's own (which may differ), for all_to_allv 0.
  uint64_t count;
  uint64_t total;        // all_gatherv, reduce_scatterv: the sum of the per-rank counts
  uint64_t counts_hash;  // all_gatherv, reduce_scatterv: hash_counts of them
  uint64_t outer;        // CollectiveArgs::outer

  static OpSignature of(const CollectiveArgs& args);

  // The same operation: kind, dtype, op, root, the counts every rank
  // passes alike (all_to_allv's, which differ by pair, are left to
  // whoever knows both sides of a pair) and, for a step, the operation it
  // is a step of.
  bool same(const OpSignature& other) const;

  // "gang_all_reduce(float32, count 4, sum)"; for a signature off the wire
  // that names no operation, says so. With the operation's number:
  // "gang_all_reduce #7 (float32, count 4, sum)".
  std::string describe() const;
  std::string describe(uint64_t seq) const;
};
static_assert(sizeof(OpSignature) == 40, "signatures are 40 bytes on the wire");

// A hash of per-rank counts, the same in every process.
uint64_t hash_counts(const std::vector<size_t>& counts);

// all_gatherv and reduce_scatterv: the per-rank counts every rank passes alike.
inline bool per_rank_counts(OpKind k) {
  return k == OpKind::kAllGatherV || k == OpKind::kReduceScatterV;
}

// Inline: on every operation's path (shm's descriptors, gloo's frames).
inline OpSignature OpSignature::of(const CollectiveArgs& a) {
  const OpInfo& info = op_info(a.kind);
  OpSignature s{};
  s.kind = static_cast<uint8_t>(a.kind);
  s.dtype = static_cast<uint8_t>(a.dtype);
  s.op = info.reducing ? static_cast<uint8_t>(a.op) : 0;
  s.root = info.rooted ? a.root : info.p2p ? a.tag : 0;
  if (a.kind != OpKind::kAllToAllV && a.kind != OpKind::kBarrier) s.count = a.count;
  if (per_rank_counts(a.kind)) {
    s.counts_hash = hash_counts(a.recv_counts);
    for (size_t c : a.recv_counts) s.total += c;
  }
  s.outer = a.outer;
  return s;
}

inline bool OpSignature::same(const OpSignature& o) const {
  if (kind != o.kind || dtype != o.dtype || op != o.op || root != o.root || outer != o.outer) {
    return false;
  }
  const auto k = static_cast<OpKind>(kind);
  if (per_rank_counts(k)) return total == o.total && counts_hash == o.counts_hash;
  return count == o.count;
}

// CollectiveArgs::outer for the steps of the operation `a`.
uint64_t outer_of(const CollectiveArgs& a);

// The one wording of a mismatch, as an Error (kMismatch) naming both ranks
// as facts: "ranks called different operations: rank <me> called <mine>
// but rank <peer> called <theirs>".
Error mismatch(int me, const OpSignature& mine, int peer, const OpSignature& theirs);
// The same, where what differs is not the signature (a peer in another
// turn, per-rank count arrays, broadcasts that did not meet): "ranks called
// different operations: <what>".
Error mismatch(const Text& what);

// The one wording of a timeout (kTimeout): "timed out waiting for <whom>",
// `whom` naming the ranks (Rank, Ranks) and, in brackets, what is known of
// them.
Error timed_out(const Text& whom);

// The one wording of lost peers (kPeerLost): "rank 2 is gone (<how>)",
// "ranks 1, 2 are gone (<how>)".
Error peers_gone(const std::vector<int>& ranks, const Text& how);

// Offsets (in elements) of each rank's chunk for per-rank counts.
std::vector<size_t> prefix_offsets(const std::vector<size_t>& counts);

}  // namespace gang::core
