// gangs_split_parallel: every axis of a layout, built without a split's
// all-gather. The layout is a pure function every rank computes alike, so
// membership needs no traffic; one all-gather of a fingerprint checks that
// the ranks agree on the configuration.
//
// gangs_split_after_loss: the same on the whole replicas among a shrunk
// gang's survivors (topology/after_loss.h). Their old ranks are the one
// thing the survivors do not know of each other; one all-gather carries
// them, each beside a fingerprint of the old layout.
#include <algorithm>
#include <cstring>
#include <map>

#include "base/hash.h"
#include "core/control_channel.h"
#include "core/gang.h"
#include "core/log.h"
#include "topology/after_loss.h"

namespace gang::core {

namespace {

uint64_t fnv1a(const std::string& s) { return base::fnv1a(s.data(), s.size()); }

}  // namespace

Gang::AxisGangs Gang::split_parallel(const topology::Layout& layout) {
  static const char* const api = "gangs_split_parallel";
  const std::string fingerprint = layout.describe();
  if (layout.size() != size_) {
    fail(Status::kInternal, api, ": layout of size ", layout.size(),
         " for a gang of size ", size_);
  }
  const uint64_t mine = fnv1a(fingerprint);
  std::vector<uint64_t> all;
  control(api, [&](Clock::time_point deadline) {
    all = control_->all_gather_words(mine, size_, deadline);
  });
  for (int r = 0; r < size_; ++r) {
    if (all[static_cast<size_t>(r)] != mine) {
      fail(Status::kMismatch, api, ": rank ", r,
           " passed a different configuration than rank ", rank_, " (",
           fingerprint, ")");
    }
  }

  const uint64_t id = splits_++;
  AxisGangs out;
  std::map<std::vector<int>, std::shared_ptr<Gang>> made;
  std::vector<int> everyone(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) everyone[static_cast<size_t>(r)] = r;
  made[everyone] = shared_from_this();
  // Every rank walks the axes in the same order, so the members of a group
  // create it at the same point and no rendezvous waits on another.
  for (int a = 0; a < topology::kNumAxes; ++a) {
    const auto axis = static_cast<topology::Axis>(a);
    std::vector<int> members = layout.group(axis, rank_);
    auto it = made.find(members);
    if (it == made.end()) {
      const std::string name = topology::axis_name(axis);
      const std::string where =
          str_cat("par", id, "/", name, layout.group_index(axis, rank_));
      const int index = static_cast<int>(
          std::find(members.begin(), members.end(), rank_) - members.begin());
      it = made
               .emplace(members,
                        make_child(child_setup(
                            members, name, where,
                            layout.group_index(axis, rank_), index)))
               .first;
    }
    out[static_cast<size_t>(a)] = it->second;
  }
  GANG_LOG(kInfo, "gang \"", name_, "\" rank ", rank_, ": split into ",
           made.size(), " distinct gangs for ", layout.order_string());
  return out;
}

Gang::AfterLossGangs Gang::split_after_loss(
    int old_rank, int old_size, const topology::ParallelConfig& config) {
  static const char* const api = "gangs_split_after_loss";
  if (caps_->emulates_peers) {
    fail(Status::kUnsupported, api,
         ": a fake gang cannot learn its peers' old ranks");
  }
  if (old_rank < 0 || old_rank >= old_size || size_ > old_size) {
    fail(Status::kInvalidArgument, api, ": rank ", old_rank, " of ", old_size,
         " in the old gang cannot be a survivor in gang \"", name_, "\" of ",
         size_, " (pass the gang given to gang_shrink and the gang it made)");
  }
  const topology::Layout old(old_size, config, api);
  const std::string agreed = str_cat("size=", old_size, " ", old.describe());
  // The fingerprint's high half beside the old rank: one word a rank.
  constexpr uint64_t kHigh = 0xffffffff00000000ull;
  const uint64_t mine =
      (fnv1a(agreed) & kHigh) | static_cast<uint32_t>(old_rank);
  std::vector<uint64_t> all;
  control(api, [&](Clock::time_point deadline) {
    all = control_->all_gather_words(mine, size_, deadline);
  });
  std::vector<int> survivors(static_cast<size_t>(size_));
  std::vector<int> where(static_cast<size_t>(old_size), -1);
  for (int r = 0; r < size_; ++r) {
    const uint64_t w = all[static_cast<size_t>(r)];
    const int o = static_cast<int>(w & ~kHigh);
    if ((w & kHigh) != (mine & kHigh) || o < 0 || o >= old_size) {
      fail(Status::kMismatch, api, ": rank ", r,
           " passed a different configuration or old gang than rank ", rank_,
           " (", agreed, ")");
    }
    int& seen = where[static_cast<size_t>(o)];
    if (seen >= 0) {
      fail(Status::kInvalidArgument, api, ": ranks ", seen, " and ", r,
           " of gang \"", name_, "\" were both rank ", o,
           " of the old gang (each rank passes its own old gang)");
    }
    seen = r;
    survivors[static_cast<size_t>(r)] = o;
  }

  const topology::AfterLoss plan =
      topology::after_loss(old_size, config, survivors, api);
  const uint64_t id = splits_++;
  std::vector<int> members;
  members.reserve(plan.active.size());
  int index = -1;
  for (int o : plan.active) {
    if (o == old_rank) index = static_cast<int>(members.size());
    members.push_back(where[static_cast<size_t>(o)]);
  }
  AfterLossGangs out;
  if (index < 0) {
    GANG_LOG(kInfo, "gang \"", name_, "\" rank ", rank_, " (old rank ",
             old_rank, ") is a spare after the loss: ", plan.active.size(),
             " of ", size_, " survivors go on with dp=", plan.config.dp);
    return out;
  }
  const std::string label = str_cat("loss", id);
  out.active = make_child(child_setup(members, label, label, 0, index));
  const topology::Layout now(out.active->size(), plan.config, api);
  out.axes = out.active->split_parallel(now);
  GANG_LOG(kInfo, "gang \"", name_, "\" rank ", rank_, " (old rank ", old_rank,
           ") goes on as rank ", index, " of ", members.size(),
           " after the loss: ", now.describe(), " (",
           size_ - out.active->size(), " spare(s))");
  return out;
}

}  // namespace gang::core
