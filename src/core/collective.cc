#include "core/collective.h"

#include "base/error.h"
#include "base/hash.h"

namespace gang::core {

namespace {

// Indexed by OpKind.
constexpr OpInfo kOps[] = {
    // api                    rooted reducing p2p    vector_counts
    {"gang_all_reduce",         false, true,  false, false},
    {"gang_reduce",             true,  true,  false, false},
    {"gang_broadcast",          true,  false, false, false},
    {"gang_all_gather",         false, false, false, false},
    {"gang_all_gatherv",        false, false, false, true},
    {"gang_gather",             true,  false, false, false},
    {"gang_scatter",            true,  false, false, false},
    {"gang_reduce_scatter",     false, true,  false, false},
    {"gang_reduce_scatterv",    false, true,  false, true},
    {"gang_all_to_all",         false, false, false, false},
    {"gang_all_to_allv",        false, false, false, true},
    {"gang_barrier",            false, false, false, false},
    {"gang_send",               false, false, true,  false},
    {"gang_recv",               false, false, true,  false},
};
static_assert(sizeof kOps / sizeof kOps[0] == kNumOpKinds,
              "one row per OpKind");

}  // namespace

const OpInfo& op_info(OpKind kind) {
  return kOps[static_cast<size_t>(kind)];
}

namespace {

bool per_rank_counts(OpKind k) {
  return k == OpKind::kAllGatherV || k == OpKind::kReduceScatterV;
}

}  // namespace

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

OpSignature OpSignature::of(const CollectiveArgs& a) {
  const OpInfo& info = op_info(a.kind);
  OpSignature s{};
  s.kind = static_cast<uint8_t>(a.kind);
  s.dtype = static_cast<uint8_t>(a.dtype);
  s.op = info.reducing ? static_cast<uint8_t>(a.op) : 0;
  s.root = info.rooted ? a.root : info.p2p ? a.tag : 0;
  if (a.kind != OpKind::kAllToAllV && a.kind != OpKind::kBarrier) s.count = a.count;
  if (per_rank_counts(a.kind)) {
    s.counts_hash = hash_counts(a.recv_counts);
    for (size_t c : a.recv_counts) s.total += c;
  }
  return s;
}

bool OpSignature::same(const OpSignature& o) const {
  if (kind != o.kind || dtype != o.dtype || op != o.op || root != o.root) return false;
  const auto k = static_cast<OpKind>(kind);
  if (per_rank_counts(k)) return total == o.total && counts_hash == o.counts_hash;
  return count == o.count;
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
  return mismatch(text("rank ", Rank{me}, " called ", mine.describe(), " but rank ", Rank{peer},
                       " called ", theirs.describe()));
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
