#include "core/collective.h"

#include "base/error.h"
#include "base/hash.h"

namespace gang::core {

uint64_t hash_counts(const std::vector<size_t>& counts) {
  // Over each count's 8 bytes, little-endian whatever the host.
  uint64_t h = base::kFnvOffset;
  for (size_t c : counts) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(static_cast<uint64_t>(c) >> (8 * i));
    h = base::fnv1a(le, sizeof le, h);
  }
  return h;
}


namespace {

// A signature's arguments after `head`: "<head>(float32, count 4, sum)".
std::string describe_after(const OpSignature& sig, const std::string& head) {
  const auto k = static_cast<OpKind>(sig.kind);
  const OpInfo& info = op_info(k);
  std::string s = head + "(";
  if (k == OpKind::kBarrier) return s + ")";
  s += dtype_name(static_cast<DType>(sig.dtype));
  if (per_rank_counts(k)) {
    s += str_cat(", own count ", sig.count, ", total ", sig.total);
  } else if (k != OpKind::kAllToAllV) {
    s += str_cat(", count ", sig.count);
  }
  if (info.reducing) s += str_cat(", ", reduce_op_name(static_cast<ReduceOp>(sig.op)));
  if (info.rooted) s += str_cat(", root ", sig.root);
  if (info.p2p) s += str_cat(", tag ", sig.root);
  return s + ")";
}

bool names_an_operation(const OpSignature& sig) {
  return sig.kind < kNumOpKinds && sig.dtype <= static_cast<uint8_t>(kLastDType);
}

}  // namespace

std::string OpSignature::describe() const {
  if (!names_an_operation(*this)) return "something that is not a gang operation";
  return describe_after(*this, op_api_name(static_cast<OpKind>(kind)));
}

std::string OpSignature::describe(uint64_t seq) const {
  if (!names_an_operation(*this)) return "something that is not a gang operation";
  return describe_after(*this, str_cat(op_api_name(static_cast<OpKind>(kind)), " #", seq, " "));
}

Error mismatch(const Text& what) {
  return error(Status::kMismatch, "ranks called different operations: ", what);
}

Error mismatch(int me, const OpSignature& mine, int peer, const OpSignature& theirs) {
  OpSignature without = theirs;
  without.outer = mine.outer;
  if (mine.outer != theirs.outer && without.same(mine)) {
    return mismatch(text("rank ", Rank{me}, " and rank ", Rank{peer}, " ran ", mine.describe(),
                         " as a step of different operations (the ranks of the gang called "
                         "different operations, which this step alone cannot tell apart)"));
  }
  return mismatch(text("rank ", Rank{me}, " called ", mine.describe(), " but rank ", Rank{peer},
                       " called ", theirs.describe()));
}

uint64_t outer_of(const CollectiveArgs& a) {
  OpSignature s = OpSignature::of(a);
  if (per_rank_counts(a.kind)) s.count = 0;  // this rank's own; `total` is everyone's
  const uint64_t h = base::fnv1a(&s, sizeof s);
  return h != 0 ? h : 1;
}

Error timed_out(const Text& whom) {
  return error(Status::kTimeout, "timed out waiting for ", whom);
}

Error peers_gone(const std::vector<int>& ranks, const Text& how) {
  return error(Status::kPeerLost, ranks.size() == 1 ? "rank " : "ranks ", Ranks{ranks},
               ranks.size() == 1 ? " is gone (" : " are gone (", how, ")");
}

std::vector<size_t> prefix_offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size());
  size_t sum = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    offsets[i] = sum;
    sum += counts[i];
  }
  return offsets;
}

}  // namespace gang::core
