// Debug checks (options.debug = 1 or GANG_DEBUG=detail): before each
// collective every rank all-gathers the signature (core::OpSignature) of
// what it is about to run, so ranks that called different operations fail at once with
// GANG_ERR_MISMATCH naming both calls, instead of hanging or computing
// garbage until the timeout.
#include "core/control_channel.h"
#include "core/gang.h"

#include <algorithm>
#include <cstring>

namespace gang::core {

namespace {

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
      throw mismatch(text("rank ", Rank{rank_}, " called ", op_api_name(args.kind),
                          " with recv_counts ", list(mine.data(), n), " but rank ",
                          Rank{static_cast<int>(r)}, " with ", list(theirs, n)));
    }
  }
}

void Gang::check_fingerprint(const CollectiveArgs& args, uint64_t seq,
                             Clock::time_point deadline) {
  if (is_p2p(args.kind)) return;
  constexpr size_t kWords = sizeof(OpSignature) / sizeof(uint64_t);
  const OpSignature mine = OpSignature::of(args);
  uint64_t words[kWords];
  std::memcpy(words, &mine, sizeof mine);
  std::vector<uint64_t> all(static_cast<size_t>(size_) * kWords);
  // Its own tag space: the check must never match an operation's traffic.
  control_->fingerprint(words, all.data(), kWords, seq, deadline);
  for (int r = 0; r < size_; ++r) {
    OpSignature theirs;
    std::memcpy(&theirs, all.data() + static_cast<size_t>(r) * kWords, sizeof theirs);
    if (!theirs.same(mine)) throw mismatch(rank_, mine, r, theirs);
  }
  if (op_info(args.kind).vector_counts) check_counts(args, seq, deadline);
}

}  // namespace gang::core
