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

// The public function that issues `kind`, for messages ("gang_broadcast").
const char* op_api_name(OpKind kind);

// Whether `kind` reduces with a ReduceOp (all_reduce, reduce,
// reduce_scatter(v)).
bool is_reduction(OpKind kind);

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
