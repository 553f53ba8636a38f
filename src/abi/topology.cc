// Parallel topology: gangs_split_parallel, gangs_get and the pure layout,
// and the same after a lost rank (gangs_split_after_loss,
// gang_layout_after_loss).
#include <cstring>
#include <tuple>
#include <vector>

#include "abi/shim.h"
#include "topology/after_loss.h"
#include "topology/layout.h"

using gang::Status;
using gang::topology::Axis;

namespace {

constexpr size_t kConfigV0Size = 48;
static_assert(
    sizeof(gang_parallel_config_t) == kConfigV0Size,
    "gang_parallel_config_t grew: keep kConfigV0Size at the first version");

void defaults(gang_parallel_config_t* c) {
  c->tp = 1;
  c->cp = 1;
  c->pp = 1;
  c->dp = -1;
  c->ep = 1;
  c->sdp = -1;
  c->reserved0 = 0;
  c->reserved1 = 0;
  c->order = nullptr;
}

gang::topology::ParallelConfig read_config(const gang_parallel_config_t* user,
                                           const char* api) {
  if (user == nullptr)
    gang::fail(Status::kInvalidArgument, api, ": config is NULL");
  gang_parallel_config_t c;
  defaults(&c);
  gang::abi::read_sized(&c, sizeof c, user, user->struct_size, kConfigV0Size,
                        api, "config");
  if (c.reserved0 != 0 || c.reserved1 != 0) {
    gang::fail(Status::kInvalidArgument, api,
               ": config.reserved0 and config.reserved1 must be 0");
  }
  gang::topology::ParallelConfig p;
  p.tp = c.tp;
  p.cp = c.cp;
  p.pp = c.pp;
  p.dp = c.dp;
  p.ep = c.ep;
  p.sdp = c.sdp;
  p.order = c.order ? c.order : "";
  return p;
}

// The public axis values are the topology's; the table checks the range.
Axis to_axis(gang_axis_t axis, const char* api) {
  if (axis < GANG_AXIS_ROOT || axis > GANG_AXIS_DPCP) {
    gang::fail(Status::kInvalidArgument, api, ": axis ",
               static_cast<long long>(axis), " is not a gang_axis_t");
  }
  static const Axis kAxes[] = {Axis::kRoot, Axis::kDp, Axis::kTp,  Axis::kPp,
                               Axis::kCp,   Axis::kEp, Axis::kEdp, Axis::kSdp,
                               Axis::kRdp,  Axis::kMp, Axis::kDpcp};
  return kAxes[axis];
}

// A gangs_t for the gangs of `made`, one handle per distinct gang, whose
// root (made[kRoot]) has the handle `root`: the caller's, or with owns_root
// the gangs_t's own, freed by gangs_destroy like the others. Should a
// handle fail to be made, the owned ones made so far are destroyed with
// their gangs.
gangs_t* insert_gangs(const gang::core::Gang::AxisGangs& made, gang_t* root,
                      bool owns_root) {
  auto gangs = std::make_shared<gang::abi::Gangs>();
  static_assert(std::tuple_size<gang::core::Gang::AxisGangs>::value ==
                    sizeof gangs->axes / sizeof gangs->axes[0],
                "one handle per axis");
  struct Undo {
    gang::abi::Gangs* gangs;
    ~Undo() {
      if (gangs) {
        for (gang_t* h : gangs->owned) gang_destroy(h);
      }
    }
  } undo{gangs.get()};
  if (owns_root) gangs->owned.push_back(root);
  for (size_t a = 0; a < made.size(); ++a) {
    gang_t* h = nullptr;
    if (made[a] == made[0]) h = root;
    for (size_t b = 0; b < a && !h; ++b) {
      if (made[b] == made[a]) h = gangs->axes[b];
    }
    if (!h) {
      h = gang::abi::wrap_gang(made[a]);
      gangs->owned.push_back(h);
    }
    gangs->axes[a] = h;
  }
  gangs_t* handle = gang::abi::gangs_table().insert(gangs);
  undo.gangs = nullptr;
  return handle;
}

}  // namespace

extern "C" {

GANG_API const char* gang_axis_name(gang_axis_t axis) {
  try {
    return gang::topology::axis_name(to_axis(axis, "gang_axis_name"));
  } catch (...) {
    return "";
  }
}

GANG_API void gang_parallel_config_init_v(gang_parallel_config_t* config,
                                          size_t struct_size) {
  if (config == nullptr || struct_size < kConfigV0Size) return;
  std::memset(config, 0, struct_size);
  defaults(config);
  config->struct_size = struct_size;
}

GANG_API gang_status_t gangs_split_parallel(
    gang_t* g, const gang_parallel_config_t* config, gangs_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gangs_split_parallel";
  gang::abi::out_arg(out, api, "out");
  *out = nullptr;
  const auto root = gang::abi::pin_gang(g, api);
  const auto cfg = read_config(config, api);
  const gang::topology::Layout layout(root->size(), cfg, api);
  const auto made = root->split_parallel(layout);

  *out = insert_gangs(made, g, /*owns_root=*/false);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gangs_split_after_loss(
    gang_t* old_gang, gang_t* shrunk, const gang_parallel_config_t* config,
    gangs_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gangs_split_after_loss";
  gang::abi::out_arg(out, api, "out");
  *out = nullptr;
  gang::abi::out_arg(old_gang, api, "old_gang");
  gang::abi::out_arg(shrunk, api, "shrunk");
  // Only the old gang's place is read, so a failed or aborted one will do.
  const auto old = gang::abi::pin_gang(old_gang, api);
  const auto impl = gang::abi::pin_gang(shrunk, api);
  const auto cfg = read_config(config, api);
  const auto made = impl->split_after_loss(old->rank(), old->size(), cfg);
  if (!made.active) return GANG_OK;
  *out = insert_gangs(made.axes, gang::abi::wrap_gang(made.active),
                      /*owns_root=*/true);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_t* gangs_get(const gangs_t* gangs, gang_axis_t axis) {
  if (axis < GANG_AXIS_ROOT || axis > GANG_AXIS_DPCP) return nullptr;
  try {
    const auto set = gang::abi::gangs_table().find(gangs);
    return set ? set->axes[axis] : nullptr;
  } catch (...) {
    return nullptr;
  }
}

GANG_API gang_status_t gangs_destroy(gangs_t* gangs) {
  GANG_ABI_TRY
  if (gangs == nullptr) return GANG_OK;
  const auto set = gang::abi::gangs_table().remove(gangs, "gangs_destroy");
  if (!set) return GANG_OK;  // a forked child forgot its parent's
  gang_status_t first = GANG_OK;
  for (gang_t* h : set->owned) {
    const gang_status_t s = gang_destroy(h);
    if (first == GANG_OK) first = s;
  }
  return first;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_layout_ranks(int size,
                                         const gang_parallel_config_t* config,
                                         gang_axis_t axis, int rank, int* ranks,
                                         size_t capacity, size_t* n) {
  GANG_ABI_TRY
  static const char* const api = "gang_layout_ranks";
  gang::abi::out_arg(n, api, "n");
  *n = 0;
  const auto cfg = read_config(config, api);
  const gang::topology::Layout layout(size, cfg, api);
  const Axis a = to_axis(axis, api);
  if (rank < 0 || rank >= size) {
    gang::fail(Status::kInvalidArgument, api, ": rank ", rank,
               " is out of range for a gang of size ", size);
  }
  // The group's size is known without listing it: a capacity too small
  // is refused before anything is built (a gang of INT_MAX ranks lists
  // gigabytes).
  const auto need = static_cast<size_t>(layout.degree(a));
  *n = need;
  if (capacity < need) {
    gang::fail(Status::kInvalidArgument, api, ": capacity ", capacity,
               " is below the ", need, " ranks of the ",
               gang::topology::axis_name(a), " gang");
  }
  gang::abi::out_arg(ranks, api, "ranks");
  const std::vector<int> group = layout.group(a, rank);
  std::memcpy(ranks, group.data(), group.size() * sizeof(int));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_layout_after_loss(
    int size, const gang_parallel_config_t* config, const int* survivors,
    size_t n_survivors, gang_parallel_config_t* new_config, int* active,
    size_t capacity, size_t* n_active) {
  GANG_ABI_TRY
  static const char* const api = "gang_layout_after_loss";
  gang::abi::out_arg(n_active, api, "n_active");
  *n_active = 0;
  const auto cfg = read_config(config, api);
  const char* const order = config->order;  // before new_config may alias it
  gang::abi::out_arg(new_config, api, "new_config");
  gang_parallel_config_t c;
  gang::abi::read_sized(&c, sizeof c, new_config, new_config->struct_size,
                        kConfigV0Size, api, "new_config");
  const size_t caller_size = c.struct_size;
  if (survivors == nullptr && n_survivors > 0) {
    gang::fail(Status::kInvalidArgument, api, ": survivors is NULL");
  }
  const std::vector<int> alive(survivors, survivors + n_survivors);
  const auto plan = gang::topology::after_loss(size, cfg, alive, api);
  *n_active = plan.active.size();
  if (capacity < plan.active.size()) {
    gang::fail(Status::kInvalidArgument, api, ": capacity ", capacity,
               " is below the ", plan.active.size(), " active ranks");
  }
  gang::abi::out_arg(active, api, "active");
  std::memcpy(active, plan.active.data(), plan.active.size() * sizeof(int));
  defaults(&c);
  c.struct_size = caller_size;
  c.tp = plan.config.tp;
  c.cp = plan.config.cp;
  c.pp = plan.config.pp;
  c.dp = plan.config.dp;
  c.ep = plan.config.ep;
  c.sdp = plan.config.sdp;
  c.order = order;
  std::memcpy(new_config, &c, caller_size < sizeof c ? caller_size : sizeof c);
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
