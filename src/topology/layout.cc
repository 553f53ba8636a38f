#include "topology/layout.h"

#include <algorithm>

#include "base/error.h"

namespace gang::topology {

namespace {

constexpr const char* kSlotNames[4] = {"tp", "cp", "pp", "dp"};
constexpr std::array<int, 4> kDefaultOrder = {0, 1, 2, 3};

constexpr const char* kAxisNames[kNumAxes] = {
    "root", "dp", "tp", "pp", "cp", "ep", "edp", "sdp", "rdp", "mp", "dpcp"};

int slot_of(const std::string& name) {
  for (int s = 0; s < 4; ++s) {
    if (name == kSlotNames[s]) return s;
  }
  return -1;
}

}  // namespace

const char* axis_name(Axis axis) {
  const int i = static_cast<int>(axis);
  return i >= 0 && i < kNumAxes ? kAxisNames[i] : "?";
}

Layout::Layout(int size, const ParallelConfig& c, const char* api)
    : size_(size) {
  auto bad = [api](auto&&... parts) {
    fail(Status::kInvalidArgument, api, ": ", parts...);
  };
  if (size < 1) bad("the gang size (", size, ") must be at least 1");
  const std::pair<const char*, int> degrees[] = {
      {"tp", c.tp}, {"cp", c.cp}, {"pp", c.pp}, {"ep", c.ep}};
  for (const auto& [name, d] : degrees) {
    if (d < 1) bad(name, " (", d, ") must be at least 1");
  }
  if (c.dp != -1 && c.dp < 1) bad("dp (", c.dp, ") must be at least 1, or -1");
  if (c.sdp != -1 && c.sdp < 1) {
    bad("sdp (", c.sdp, ") must be at least 1, or -1");
  }
  const long long model = 1LL * c.tp * c.cp * c.pp;
  if (size % model != 0) {
    bad("tp*cp*pp (", model, ") must divide the gang size (", size, ")");
  }
  int dp = static_cast<int>(size / model);
  if (c.dp != -1 && c.dp != dp) {
    bad("tp*cp*pp*dp (", model * c.dp, ") must equal the gang size (", size,
        ")");
  }
  degree_ = {c.tp, c.cp, c.pp, dp};

  const int dpcp = dp * c.cp;
  if (dpcp % c.ep != 0) bad("ep (", c.ep, ") must divide dp*cp (", dpcp, ")");
  ep_ = c.ep;
  sdp_ = c.sdp == -1 ? dpcp : c.sdp;
  if (dpcp % sdp_ != 0) bad("sdp (", sdp_, ") must divide dp*cp (", dpcp, ")");

  // Parse the order: named axes first, in the given order; unnamed axes of
  // degree 1 after them (their coordinate is always 0).
  if (c.order.empty()) {
    order_ = kDefaultOrder;
  } else {
    std::vector<int> named;
    size_t start = 0;
    while (start <= c.order.size()) {
      const size_t dash = c.order.find('-', start);
      const std::string part = c.order.substr(
          start, dash == std::string::npos ? std::string::npos : dash - start);
      const int s = slot_of(part);
      if (s < 0) {
        bad("order \"", c.order, "\" names unknown axis \"", part,
            "\" (known: tp, cp, pp, dp)");
      }
      if (std::find(named.begin(), named.end(), s) != named.end()) {
        bad("order \"", c.order, "\" names \"", part, "\" twice");
      }
      named.push_back(s);
      if (dash == std::string::npos) break;
      start = dash + 1;
    }
    for (int s = 0; s < 4; ++s) {
      if (std::find(named.begin(), named.end(), s) != named.end()) continue;
      if (degree_[static_cast<size_t>(s)] != 1) {
        bad("order \"", c.order, "\" leaves out \"", kSlotNames[s],
            "\" of degree ", degree_[static_cast<size_t>(s)]);
      }
      named.push_back(s);
    }
    std::copy(named.begin(), named.end(), order_.begin());
  }
  int stride = 1;
  for (int s : order_) {
    stride_[static_cast<size_t>(s)] = stride;
    stride *= degree_[static_cast<size_t>(s)];
  }
}

int Layout::degree(Axis axis) const {
  switch (axis) {
    case Axis::kRoot:
      return size_;
    case Axis::kTp:
      return degree_[0];
    case Axis::kCp:
      return degree_[1];
    case Axis::kPp:
      return degree_[2];
    case Axis::kDp:
      return degree_[3];
    case Axis::kDpcp:
      return degree_[3] * degree_[1];
    case Axis::kMp:
      return degree_[0] * degree_[2];
    case Axis::kEp:
      return ep_;
    case Axis::kEdp:
      return degree_[3] * degree_[1] / ep_;
    case Axis::kSdp:
      return sdp_;
    case Axis::kRdp:
      return degree_[3] * degree_[1] / sdp_;
  }
  return 0;
}

int Layout::coord(int rank, int slot) const {
  const auto s = static_cast<size_t>(slot);
  return rank / stride_[s] % degree_[s];
}

Coords Layout::coords(int rank) const {
  return {coord(rank, 0), coord(rank, 1), coord(rank, 2), coord(rank, 3)};
}

int Layout::rank_of(const Coords& c) const {
  return c.tp * stride_[0] + c.cp * stride_[1] + c.pp * stride_[2] +
         c.dp * stride_[3];
}

std::vector<int> Layout::vary(int rank,
                              std::initializer_list<int> slots) const {
  // Clear the varying coordinates, then enumerate them; sorting gives the
  // order in which earlier axes of `order` vary faster.
  int base = rank;
  for (int s : slots) base -= coord(rank, s) * stride_[static_cast<size_t>(s)];
  std::vector<int> ranks{base};
  for (int s : slots) {
    const auto i = static_cast<size_t>(s);
    std::vector<int> next;
    next.reserve(ranks.size() * static_cast<size_t>(degree_[i]));
    for (int r : ranks) {
      for (int k = 0; k < degree_[i]; ++k) next.push_back(r + k * stride_[i]);
    }
    ranks.swap(next);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<int> Layout::group(Axis axis, int rank) const {
  switch (axis) {
    case Axis::kRoot:
      return vary(rank, {0, 1, 2, 3});
    case Axis::kTp:
      return vary(rank, {0});
    case Axis::kCp:
      return vary(rank, {1});
    case Axis::kPp:
      return vary(rank, {2});
    case Axis::kDp:
      return vary(rank, {3});
    case Axis::kDpcp:
      return vary(rank, {3, 1});
    case Axis::kMp:
      return vary(rank, {0, 2});
    case Axis::kEp:
    case Axis::kEdp:
    case Axis::kSdp:
    case Axis::kRdp: {
      // Blocks of the dpcp group: contiguous ones, or the strided rest.
      const std::vector<int> dpcp = vary(rank, {3, 1});
      const bool expert = axis == Axis::kEp || axis == Axis::kEdp;
      const size_t block = static_cast<size_t>(expert ? ep_ : sdp_);
      const size_t pos = static_cast<size_t>(
          std::find(dpcp.begin(), dpcp.end(), rank) - dpcp.begin());
      std::vector<int> out;
      if (axis == Axis::kEp || axis == Axis::kSdp) {
        const size_t first = pos / block * block;
        out.assign(dpcp.begin() + static_cast<long>(first),
                   dpcp.begin() + static_cast<long>(first + block));
      } else {
        for (size_t i = pos % block; i < dpcp.size(); i += block) {
          out.push_back(dpcp[i]);
        }
      }
      return out;
    }
  }
  return {};
}

int Layout::group_index(Axis axis, int rank) const {
  const int lowest = group(axis, rank).front();
  // Count the groups whose smallest rank is below ours.
  int index = 0;
  for (int r = 0; r < lowest; ++r) {
    if (group(axis, r).front() == r) ++index;
  }
  return index;
}

std::string Layout::order_string() const {
  std::string out;
  for (int s : order_) {
    if (!out.empty()) out += '-';
    out += kSlotNames[s];
  }
  return out;
}

std::string Layout::describe() const {
  return str_cat("tp=", degree_[0], " cp=", degree_[1], " pp=", degree_[2],
                 " dp=", degree_[3], " ep=", ep_, " sdp=", sdp_,
                 " order=", order_string());
}

}  // namespace gang::topology
