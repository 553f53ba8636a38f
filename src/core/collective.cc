#include "core/collective.h"

namespace gang::core {

namespace {

// Indexed by OpKind.
constexpr OpInfo kOps[] = {
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
static_assert(sizeof kOps / sizeof kOps[0] == kNumOpKinds,
              "one row per OpKind");

}  // namespace

const OpInfo& op_info(OpKind kind) {
  return kOps[static_cast<size_t>(kind)];
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
