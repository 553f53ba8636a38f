// Sub-gangs: gang_split and gang_create_subgang. Membership is agreed with
// one all-gather over the parent; the new gang rendezvous through a prefix of
// the parent's store, so no rank needs a new address.
#include <algorithm>
#include <numeric>

#include "core/gang.h"
#include "core/log.h"
#include "store/store.h"

namespace gang::core {

std::shared_ptr<Gang> Gang::split(int color, int key) {
  if (color < -1) {
    fail(Status::kInvalidArgument, "gang_split: color ", color,
         " must be >= 0, or -1 (GANG_COLOR_NONE) to stay out");
  }
  if (backend_->emulates_peers()) {
    fail(Status::kUnsupported,
         "gang_split: a fake gang cannot learn its peers' colors; use "
         "gang_create_subgang");
  }
  if (failed_.load() != 0) throw_failed("gang_split");

  // Every rank contributes (color, key); all see the same table.
  const int32_t mine[2] = {color, key};
  std::vector<int32_t> table(2 * static_cast<size_t>(size_));
  CollectiveArgs gather;
  gather.kind = OpKind::kAllGather;
  gather.send = mine;
  gather.recv = table.data();
  gather.count = 2;
  gather.dtype = DType::kInt32;
  run_blocking(gather);

  const uint64_t id = splits_++;
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < size_; ++r) {
    if (table[2 * static_cast<size_t>(r)] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return table[2 * static_cast<size_t>(a) + 1] <
           table[2 * static_cast<size_t>(b) + 1];
  });
  const std::string label = str_cat("split", id, ".", color);
  return make_child(members, label, label);
}

std::shared_ptr<Gang> Gang::create_subgang(const std::vector<int>& ranks) {
  if (ranks.empty()) {
    fail(Status::kInvalidArgument, "gang_create_subgang: n must be at least 1");
  }
  std::vector<char> seen(static_cast<size_t>(size_), 0);
  int index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= size_) {
      fail(Status::kInvalidArgument, "gang_create_subgang: ranks[", i, "] ", r,
           " is out of range for a gang of size ", size_);
    }
    if (seen[static_cast<size_t>(r)]++) {
      fail(Status::kInvalidArgument, "gang_create_subgang: ranks[", i, "] ", r,
           " is listed twice");
    }
    if (r == rank_) index = static_cast<int>(i);
  }
  if (failed_.load() != 0) throw_failed("gang_create_subgang");

  if (backend_->emulates_peers()) {
    // No traffic: every rank knows the list, so membership is local.
    const uint64_t id = splits_++;
    if (index < 0) return nullptr;
    const std::string label = str_cat("sub", id);
    return make_child(ranks, label, label);
  }
  // A split whose color is membership and whose key is the list position
  // gives exactly the listed order.
  auto child = split(index >= 0 ? 0 : -1, index);
  return child;
}

std::shared_ptr<Gang> Gang::make_child(const std::vector<int>& members,
                                       const std::string& label,
                                       const std::string& store_label) {
  const auto it = std::find(members.begin(), members.end(), rank_);
  const int new_rank = static_cast<int>(it - members.begin());
  const int new_size = static_cast<int>(members.size());

  std::vector<int> roots;
  roots.reserve(members.size());
  for (int m : members) roots.push_back(root_ranks_[static_cast<size_t>(m)]);

  BackendConfig cfg;
  cfg.rank = new_rank;
  cfg.size = new_size;
  cfg.device_type = device_type_;
  cfg.device_index = device_index_;
  cfg.timeout = timeout();
  cfg.parent = backend_.get();
  std::string prefix;
  if (store_ && new_size > 1) {
    prefix = str_cat(store_prefix_, store_label, "/");
    cfg.store = store::with_prefix(store_, prefix + "backend/", timeout());
  }
  auto child = make(str_cat(name_, "/", label), new_rank, new_size,
                    std::move(roots), factory_, cfg, prefix);
  child->store_ = store_;
  child->debug_ = debug_;
  GANG_LOG(kInfo, "created sub-gang \"", child->name(), "\" rank ", new_rank,
           " of ", new_size);
  return child;
}

}  // namespace gang::core
