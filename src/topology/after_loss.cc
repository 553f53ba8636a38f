#include "topology/after_loss.h"

#include "base/error.h"

namespace gang::topology {

AfterLoss after_loss(int size, const ParallelConfig& config,
                     const std::vector<int>& survivors, const char* api) {
  const Layout old(size, config, api);
  std::vector<char> alive(static_cast<size_t>(size), 0);
  for (size_t i = 0; i < survivors.size(); ++i) {
    const int r = survivors[i];
    if (r < 0 || r >= size) {
      fail(Status::kInvalidArgument, api, ": survivors[", i, "] (", r,
           ") is out of range for a gang of size ", size);
    }
    if (alive[static_cast<size_t>(r)]++) {
      fail(Status::kInvalidArgument, api, ": survivors[", i, "] (", r,
           ") is listed twice");
    }
  }

  // A replica is whole when every rank of its dp coordinate survived.
  const int old_dp = old.degree(Axis::kDp);
  std::vector<char> whole(static_cast<size_t>(old_dp), 1);
  for (int r = 0; r < size; ++r) {
    if (!alive[static_cast<size_t>(r)]) {
      whole[static_cast<size_t>(old.coords(r).dp)] = 0;
    }
  }
  std::vector<int> kept;
  for (int d = 0; d < old_dp; ++d) {
    if (whole[static_cast<size_t>(d)]) kept.push_back(d);
  }
  const int model = size / old_dp;
  if (kept.empty()) {
    fail(Status::kInvalidArgument, api, ": no data-parallel replica survived "
         "whole (each of the ", old_dp, " replicas of tp*cp*pp = ", model,
         " ranks lost a rank), so no layout of this configuration fits the ",
         survivors.size(), " survivors");
  }

  // The largest count of whole replicas the layout accepts. Layout is the
  // one judge of what fits, so its constructor is asked rather than its
  // rules repeated here.
  AfterLoss out;
  out.config = config;
  std::string refusal;
  int dp = static_cast<int>(kept.size());
  for (; dp >= 1; --dp) {
    out.config.dp = dp;
    try {
      const std::string label = str_cat("dp=", dp);
      const Layout fits(dp * model, out.config, label.c_str());
      break;
    } catch (const Error& e) {
      if (e.status() != Status::kInvalidArgument) throw;
      if (refusal.empty()) refusal = e.what();
    }
  }
  if (dp == 0) {
    fail(Status::kInvalidArgument, api, ": ", kept.size(),
         " data-parallel replica(s) survived whole, and no dp of ",
         kept.size(), " or fewer fits the configuration (", refusal, ")");
  }
  kept.resize(static_cast<size_t>(dp));

  const Layout now(dp * model, out.config, api);
  out.active.reserve(static_cast<size_t>(dp * model));
  for (int r = 0; r < dp * model; ++r) {
    Coords c = now.coords(r);
    c.dp = kept[static_cast<size_t>(c.dp)];
    out.active.push_back(old.rank_of(c));
  }
  std::vector<char> active(static_cast<size_t>(size), 0);
  for (int r : out.active) active[static_cast<size_t>(r)] = 1;
  for (int r = 0; r < size; ++r) {
    if (alive[static_cast<size_t>(r)] && !active[static_cast<size_t>(r)]) {
      out.spares.push_back(r);
    }
  }
  return out;
}

}  // namespace gang::topology
