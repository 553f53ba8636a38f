// gangs_split_parallel: every axis of a layout, built without a split's
// all-gather. The layout is a pure function every rank computes alike, so
// membership needs no traffic; one all-gather of a fingerprint checks that
// the ranks agree on the configuration.
#include <algorithm>
#include <cstring>
#include <map>

#include "core/control_channel.h"
#include "core/gang.h"
#include "core/log.h"

namespace gang::core {

namespace {

// FNV-1a: stable across processes and builds, unlike std::hash.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Gang::AxisGangs Gang::split_parallel(const topology::Layout& layout,
                                     const std::string& fingerprint) {
  static const char* const api = "gangs_split_parallel";
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

}  // namespace gang::core
