// The parallel layout after a loss, as a pure function: which survivors of a
// gang laid out by a ParallelConfig can go on in the same layout with fewer
// data-parallel replicas, and which are set aside.
//
// A replica is the tp*cp*pp ranks sharing one dp coordinate: one whole copy
// of the model. A replica that lost any rank cannot run (its tensor-,
// context- or pipeline-parallel groups are broken), so:
//  - the replicas all of whose ranks survived are kept; the survivors of
//    broken replicas are spares;
//  - dp becomes the number kept, lowered further to the largest count the
//    layout accepts (ep and an explicit sdp must divide dp*cp), dropping the
//    kept replicas with the highest dp coordinates, whose ranks become
//    spares too;
//  - each kept replica keeps its tp, cp and pp coordinates, and the kept
//    replicas take the dp coordinates 0..dp-1 in the order of their old
//    ones. `active` lists their old ranks in the order of the new ranks.
//    As the dp coordinates keep their order and the others stay, that is
//    ascending old-rank order under every `order`; it is computed through
//    the layouts all the same, so that it stays right if layouts change.
#pragma once

#include <vector>

#include "topology/layout.h"

namespace gang::topology {

struct AfterLoss {
  // The old configuration with dp set to the new degree; sdp, ep, order and
  // the model degrees are as given (a default sdp stays -1: full shard).
  ParallelConfig config;
  // Old ranks, new rank i at active[i]: every rank of the new layout.
  std::vector<int> active;
  // The survivors left out, ascending.
  std::vector<int> spares;
};

// `survivors` are old ranks of a gang of `size` laid out by `config`, in any
// order. Throws gang::Error(kInvalidArgument), prefixed by `api`, for a bad
// configuration, a survivor out of range or listed twice, or when no layout
// fits (no replica survived whole, or none of the counts of whole replicas
// suits ep or sdp).
AfterLoss after_loss(int size, const ParallelConfig& config,
                     const std::vector<int>& survivors, const char* api);

}  // namespace gang::topology
