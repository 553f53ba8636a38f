#include "core/collective.h"

namespace gang::core {

const char* op_api_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "gang_all_reduce";
    case OpKind::kReduce:
      return "gang_reduce";
    case OpKind::kBroadcast:
      return "gang_broadcast";
    case OpKind::kAllGather:
      return "gang_all_gather";
    case OpKind::kAllGatherV:
      return "gang_all_gatherv";
    case OpKind::kGather:
      return "gang_gather";
    case OpKind::kScatter:
      return "gang_scatter";
    case OpKind::kReduceScatter:
      return "gang_reduce_scatter";
    case OpKind::kReduceScatterV:
      return "gang_reduce_scatterv";
    case OpKind::kAllToAll:
      return "gang_all_to_all";
    case OpKind::kAllToAllV:
      return "gang_all_to_allv";
    case OpKind::kBarrier:
      return "gang_barrier";
    case OpKind::kSend:
      return "gang_send";
    case OpKind::kRecv:
      return "gang_recv";
  }
  return "gang_?";
}

bool is_reduction(OpKind k) {
  return k == OpKind::kAllReduce || k == OpKind::kReduce ||
         k == OpKind::kReduceScatter || k == OpKind::kReduceScatterV;
}

std::vector<size_t> prefix_offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size());
  size_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = sum;
    sum += counts[i];
  }
  return offsets;
}

}  // namespace gang::core
