// CollectiveArgs: one operation, as the core validates it and a backend runs
// it. Every public collective fills one of these and enters the core through
// Gang::issue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

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
const OpInfo& op_info(OpKind kind);

inline const char* op_api_name(OpKind kind) { return op_info(kind).api; }
inline bool is_reduction(OpKind kind) { return op_info(kind).reducing; }
inline bool is_p2p(OpKind kind) { return op_info(kind).p2p; }

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
  int root = 0;  // root, or the peer of send/recv
  int tag = 0;
  // Per-rank counts, copied from the caller so asynchronous operations own
  // them: all_gatherv and reduce_scatterv (recv_counts), all_to_allv (both).
  std::vector<size_t> recv_counts;
  std::vector<size_t> send_counts;
};

// Offsets (in elements) of each rank's chunk for per-rank counts.
std::vector<size_t> prefix_offsets(const std::vector<size_t>& counts);

}  // namespace gang::core
