// The parallel layout as pure functions: degrees and an order string in, the
// ranks of any axis's group for any rank out. No processes, no I/O.
//
// The dense axes tp, cp, pp and dp each get a coordinate; `order` lists them
// fastest-varying first, so with the default "tp-cp-pp-dp"
//   rank = tp + TP*(cp + CP*(pp + PP*dp)).
// The other axes are made of those: dpcp (dp and cp vary), mp (tp and pp
// vary), ep/edp (contiguous blocks of the dpcp group and the strided rest),
// sdp/rdp (likewise, for FSDP sharding and replication), root (everyone).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace gang::topology {

// Values match gang_axis_t.
enum class Axis : int {
  kRoot = 0,
  kDp = 1,
  kTp = 2,
  kPp = 3,
  kCp = 4,
  kEp = 5,
  kEdp = 6,
  kSdp = 7,
  kRdp = 8,
  kMp = 9,
  kDpcp = 10,
};
constexpr int kNumAxes = 11;

const char* axis_name(Axis axis);

struct ParallelConfig {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = -1;  // -1: size / (tp*cp*pp)
  int ep = 1;
  int sdp = -1;       // -1: dp*cp (full shard)
  std::string order;  // "": "tp-cp-pp-dp"
};

// Each rank's coordinates along the dense axes.
struct Coords {
  int tp = 0;
  int cp = 0;
  int pp = 0;
  int dp = 0;
};

class Layout {
 public:
  // Validates and resolves the defaults; throws gang::Error(kInvalidArgument)
  // with a message naming the sizes, prefixed by `api`.
  Layout(int size, const ParallelConfig& config, const char* api);

  int size() const { return size_; }
  int degree(Axis axis) const;
  Coords coords(int rank) const;
  int rank_of(const Coords& c) const;

  // The ranks of `rank`'s group on `axis`, in gang-rank order.
  std::vector<int> group(Axis axis, int rank) const;
  // A number for that group, the same for all its members and distinct
  // between groups of one axis: the position of the group when groups are
  // listed by their smallest rank.
  int group_index(Axis axis, int rank) const;

  // "tp-cp-pp-dp" with the defaults filled in.
  std::string order_string() const;
  // Every degree and the order, defaults resolved ("tp=2 cp=1 pp=1 dp=4
  // ep=1 sdp=4 order=tp-cp-pp-dp"): equal for equal layouts, so ranks
  // compare it to agree on one.
  std::string describe() const;

 private:
  // Dense axis slots in Coords order: 0 tp, 1 cp, 2 pp, 3 dp.
  std::array<int, 4> degree_{};  // by slot
  std::array<int, 4> stride_{};  // by slot
  std::array<int, 4> order_{};   // slots, fastest first
  int size_ = 1;
  int ep_ = 1;
  int sdp_ = 1;

  int coord(int rank, int slot) const;
  // Ranks sharing every dense coordinate of `rank` except the varying slots.
  std::vector<int> vary(int rank, std::initializer_list<int> slots) const;
};

}  // namespace gang::topology
