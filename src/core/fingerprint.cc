// Debug checks (options.debug = 1 or GANG_DEBUG=detail): before each
// collective every rank all-gathers a fingerprint of what it is about to
// run, so ranks that called different operations fail at once with
// GANG_ERR_MISMATCH naming both calls, instead of hanging or computing
// garbage until the timeout.
#include "core/control_channel.h"
#include "core/gang.h"

#include <algorithm>

namespace gang::core {

namespace {

// What must agree across ranks. Counts that legitimately differ between
// ranks (all_to_allv's, all_gatherv's own send count) are left out; the
// per-rank counts every rank passes alike are folded into one hash.
struct Fingerprint {
  uint64_t kind;
  uint64_t dtype;
  uint64_t op;
  uint64_t root;
  uint64_t count;
};

uint64_t fold(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

Fingerprint fingerprint_of(const CollectiveArgs& a) {
  Fingerprint f{};
  f.kind = static_cast<uint64_t>(a.kind);
  f.dtype = static_cast<uint64_t>(a.dtype);
  f.op = is_reduction(a.kind) ? static_cast<uint64_t>(a.op) : 0;
  f.root = op_info(a.kind).rooted ? static_cast<uint64_t>(a.root) : 0;
  switch (a.kind) {
    case OpKind::kAllGatherV:
    case OpKind::kReduceScatterV:
      for (size_t c : a.recv_counts) f.count = fold(f.count, c);
      break;
    case OpKind::kAllToAllV:
    case OpKind::kBarrier:
      break;
    default:
      f.count = a.count;
  }
  return f;
}

std::string describe(const Fingerprint& f) {
  const auto kind = static_cast<OpKind>(f.kind);
  std::string s = str_cat(op_api_name(kind), "(");
  if (kind == OpKind::kBarrier) return s + ")";
  s += dtype_name(static_cast<DType>(f.dtype));
  if (kind != OpKind::kAllGatherV && kind != OpKind::kReduceScatterV &&
      kind != OpKind::kAllToAllV) {
    s += str_cat(", count ", f.count);
  }
  if (is_reduction(kind))
    s += str_cat(", ", reduce_op_name(static_cast<ReduceOp>(f.op)));
  if (op_info(kind).rooted) s += str_cat(", root ", f.root);
  return s + ")";
}

std::string list(const uint64_t* v, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += str_cat(i ? ", " : "", v[i]);
  return s + "]";
}

}  // namespace

// The per-rank count arrays of the v-collectives, in full: every rank's
// arrays are gathered and compared, so the message names the counts that
// differ (all_gatherv, reduce_scatterv: every rank passes the same array;
// all_to_allv: what p sends this rank is what this rank expects from p).
void Gang::check_counts(const CollectiveArgs& args, uint64_t seq,
                        Clock::time_point deadline) {
  const size_t n = static_cast<size_t>(size_);
  const bool pairwise = args.kind == OpKind::kAllToAllV;
  const std::vector<size_t>& counts = pairwise ? args.send_counts : args.recv_counts;
  std::vector<uint64_t> mine(counts.begin(), counts.end());
  std::vector<uint64_t> all(n * n);
  control_->fingerprint(mine.data(), all.data(), n, seq, deadline);
  for (size_t r = 0; r < n; ++r) {
    const uint64_t* theirs = all.data() + r * n;
    if (pairwise) {
      const uint64_t sends = theirs[static_cast<size_t>(rank_)];
      if (sends != args.recv_counts[r]) {
        fail(Status::kMismatch, op_api_name(args.kind), ": rank ", r,
             " sends ", sends, " elements to rank ", rank_, ", which expects ",
             args.recv_counts[r], " (rank ", r, "'s send_counts ",
             list(theirs, n), ")");
      }
    } else if (!std::equal(mine.begin(), mine.end(), theirs)) {
      fail(Status::kMismatch, "ranks called different operations: rank ", rank_,
           " called ", op_api_name(args.kind), " with recv_counts ",
           list(mine.data(), n), " but rank ", r, " with ", list(theirs, n));
    }
  }
}

void Gang::check_fingerprint(const CollectiveArgs& args, uint64_t seq,
                             Clock::time_point deadline) {
  if (is_p2p(args.kind)) return;
  const Fingerprint mine = fingerprint_of(args);
  std::vector<Fingerprint> all(static_cast<size_t>(size_));
  // Its own tag space: the check must never match an operation's traffic.
  control_->fingerprint(reinterpret_cast<const uint64_t*>(&mine),
                        reinterpret_cast<uint64_t*>(all.data()),
                        sizeof(Fingerprint) / sizeof(uint64_t), seq, deadline);
  for (int r = 0; r < size_; ++r) {
    const Fingerprint& theirs = all[static_cast<size_t>(r)];
    if (theirs.kind != mine.kind || theirs.dtype != mine.dtype ||
        theirs.op != mine.op || theirs.root != mine.root ||
        theirs.count != mine.count) {
      fail(Status::kMismatch, "ranks called different operations: rank ", rank_,
           " called ", describe(mine), " but rank ", r, " called ",
           describe(theirs));
    }
  }
  if (op_info(args.kind).vector_counts) check_counts(args, seq, deadline);
}

}  // namespace gang::core
