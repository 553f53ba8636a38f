// Sub-gangs: gang_split and gang_create_subgang. Membership is agreed with
// one all-gather over the parent; the new gang rendezvous through a prefix of
// the parent's store, so no rank needs a new address. The survivors of a
// shrink (membership.h) make their gang here too, once they agreed.
#include <algorithm>
#include <numeric>

#include "base/secret.h"
#include "core/control_channel.h"
#include "core/executor.h"
#include "core/failure.h"
#include "core/gang.h"
#include "core/log.h"
#include "store/store.h"

namespace gang::core {

std::shared_ptr<Gang> Gang::split(int color, int key) {
  static const char* const api = "gang_split";
  if (color < -1) {
    fail(Status::kInvalidArgument, api, ": color ", color,
         " must be >= 0, or -1 (GANG_COLOR_NONE) to stay out");
  }
  if (caps_->emulates_peers) {
    fail(Status::kUnsupported,
         "gang_split: a fake gang cannot learn its peers' colors; use "
         "gang_create_subgang");
  }
  // Every rank contributes (color, key); all see the same table.
  const int32_t mine[2] = {color, key};
  std::vector<int32_t> table(2 * static_cast<size_t>(size_));
  control(api, [&](Clock::time_point deadline) {
    control_->all_gather(mine, table.data(), 2, DType::kInt32, deadline);
  });

  const uint64_t id = splits_++;
  std::vector<int> members;
  if (color >= 0) {
    for (int r = 0; r < size_; ++r) {
      if (table[2 * static_cast<size_t>(r)] == color) members.push_back(r);
    }
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return table[2 * static_cast<size_t>(a) + 1] <
             table[2 * static_cast<size_t>(b) + 1];
    });
  }
  const std::string label = str_cat("split", id, ".", color);
  if (caps_->native_split) {
    bool native = false;
    auto child = split_natively(members, label, color, key, &native);
    if (native) return child;
  }
  if (color < 0) return nullptr;
  return make_child(child_setup(members, label, label, color, key));
}

std::shared_ptr<Gang> Gang::split_natively(const std::vector<int>& members,
                                           const std::string& label,
                                           int color, int key, bool* native) {
  static const char* const api = "gang_split";
  *native = false;
  Setup s;
  if (color >= 0) {
    s = child_setup(members, label, label, color, key);
  } else {
    s.config.rank = -1;
    s.config.size = 0;
    s.config.device_type = device_type_;
    s.config.device_index = device_index_;
    s.config.host_id = host_id_;
    s.config.timeout = timeout();
    s.config.parent = backend_.get();
    s.config.color = -1;
    s.config.key = key;
  }
  control(api, [&](Clock::time_point deadline) {
    // The split takes its place in the parent's operation order: what was
    // issued before it is posted first.
    if (!executor_->wait_idle(deadline)) {
      fail(Status::kTimeout, api, ": earlier operations of gang \"", name_,
           "\" were still being posted at the timeout");
    }
    try {
      s.made = backend_->split(s.config);
      *native = true;
    } catch (const Error& e) {
      if (e.status() != Status::kUnsupported) throw;
      GANG_LOG(kInfo, "gang \"", name_, "\": no native split (", e.what(),
               "); the members create the new gang");
    }
  });
  if (!*native || color < 0) return nullptr;
  return make_child(std::move(s));
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
  refuse_in_group("gang_create_subgang");
  if (failure_->failed()) failure_->throw_failed("gang_create_subgang");

  if (caps_->emulates_peers) {
    // No traffic: every rank knows the list, so membership is local.
    const uint64_t id = splits_++;
    if (index < 0) return nullptr;
    const std::string label = str_cat("sub", id);
    return make_child(child_setup(ranks, label, label, 0, index));
  }
  // A split whose color is membership and whose key is the list position
  // gives exactly the listed order.
  auto child = split(index >= 0 ? 0 : -1, index);
  return child;
}

Gang::Setup Gang::child_setup(const std::vector<int>& members,
                              const std::string& label,
                              const std::string& store_label, int color,
                              int key) {
  const auto it = std::find(members.begin(), members.end(), rank_);
  const int new_rank = static_cast<int>(it - members.begin());
  const int new_size = static_cast<int>(members.size());

  Setup s;
  s.name = str_cat(name_, "/", label);
  s.rank = new_rank;
  s.size = new_size;
  s.root_ranks.reserve(members.size());
  for (int m : members) s.root_ranks.push_back(root_ranks_[static_cast<size_t>(m)]);
  s.backend = backend_info_;
  s.debug = debug_;
  s.asked = asked_backend_;
  s.control_parent = control_->owns_backend() ? &control_->backend() : nullptr;

  BackendConfig& cfg = s.config;
  cfg.rank = new_rank;
  cfg.size = new_size;
  cfg.host_id = host_id_;
  if (!host_of_.empty()) {
    for (int m : members) cfg.host_of.push_back(host_of_[static_cast<size_t>(m)]);
  }
  cfg.device_type = device_type_;
  cfg.device_index = device_index_;
  cfg.timeout = timeout();
  cfg.deadline = deadline_after(timeout());
  cfg.parent = backend_.get();
  cfg.color = color;
  cfg.key = key;
  if (store_ && new_size > 1) {
    s.store = store_;
    s.store_prefix = str_cat(store_prefix_, store_label, "/");
    cfg.store = store::with_prefix(store_, s.store_prefix + "backend/", timeout());
    // Every member knows the parent's secret and the label; no one else
    // can compute the child's.
    const base::Digest d = base::hmac_sha256(secret_, "split " + store_label);
    cfg.secret.assign(d.begin(), d.end());
  }
  return s;
}

std::shared_ptr<Gang> Gang::survivors_gang(const std::vector<int>& members,
                                          const std::string& label,
                                          const std::string& name, Millis window,
                                          Lineage lineage) {
  Setup setup = child_setup(members, label, label + "/gang", 0, rank_);
  setup.name = name;
  // A fresh backend: the failed gang's is broken and must not be asked.
  setup.config.parent = nullptr;
  setup.control_parent = nullptr;
  setup.config.deadline = deadline_after(window);
  // The backend's waits on the store end with the window too.
  setup.config.store =
      store::with_prefix(store_, setup.store_prefix + "backend/", window);
  setup.lineage = std::move(lineage);
  return make_child(std::move(setup));
}

std::shared_ptr<Gang> Gang::make_child(Setup s) {
  const int new_rank = s.rank;
  const int new_size = s.size;
  auto child = make(std::move(s));
  child->stream_.store(stream_.load());
  child->stream_completion_.store(stream_completion_.load());
  GANG_LOG(kInfo, "created sub-gang \"", child->name(), "\" rank ", new_rank,
           " of ", new_size);
  return child;
}

}  // namespace gang::core
