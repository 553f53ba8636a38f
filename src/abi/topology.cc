// Parallel topology: gangs_split_parallel, gangs_get and the pure layout.
#include <cstring>

#include "abi/shim.h"
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

std::string fingerprint(const gang::topology::Layout& l,
                        const gang::topology::ParallelConfig& c) {
  return gang::str_cat(
      "tp=", c.tp, " cp=", c.cp, " pp=", c.pp, " dp=", l.degree(Axis::kDp),
      " ep=", c.ep, " sdp=", l.degree(Axis::kSdp), " order=", l.order_string());
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
  const auto made = root->split_parallel(layout, fingerprint(layout, cfg));

  auto gangs = std::make_shared<gang::abi::Gangs>();
  if (made.size() > sizeof gangs->axes / sizeof gangs->axes[0]) {
    gang::fail(Status::kInternal, api, ": ", made.size(), " axes");
  }
  // One handle per distinct gang; the root is the caller's own. Should a
  // handle fail to be made, those made so far are destroyed with their
  // gangs.
  struct Undo {
    gang::abi::Gangs* gangs;
    ~Undo() {
      if (gangs) {
        for (gang_t* h : gangs->owned) gang_destroy(h);
      }
    }
  } undo{gangs.get()};
  for (size_t a = 0; a < made.size(); ++a) {
    gang_t* h = nullptr;
    if (made[a] == root) h = g;
    for (size_t b = 0; b < a && !h; ++b) {
      if (made[b] == made[a]) h = gangs->axes[b];
    }
    if (!h) {
      h = gang::abi::wrap_gang(made[a]);
      gangs->owned.push_back(h);
    }
    gangs->axes[a] = h;
  }
  *out = gang::abi::gangs_table().insert(gangs);
  undo.gangs = nullptr;
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
  const std::vector<int> group = layout.group(a, rank);
  *n = group.size();
  if (capacity < group.size()) {
    gang::fail(Status::kInvalidArgument, api, ": capacity ", capacity,
               " is below the ", group.size(), " ranks of the ",
               gang::topology::axis_name(a), " gang");
  }
  gang::abi::out_arg(ranks, api, "ranks");
  std::memcpy(ranks, group.data(), group.size() * sizeof(int));
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
