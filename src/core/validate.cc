#include "core/validate.h"

#include <cstdint>
#include <limits>

#include "base/error.h"

namespace gang::core {

namespace {

constexpr int kTagMax = std::numeric_limits<int32_t>::max();

class Checker {
 public:
  Checker(const CollectiveArgs& a, int rank, int size)
      : a_(a),
        rank_(rank),
        size_(size),
        api_(op_api_name(a.kind)),
        esize_(dtype_size(a.dtype)) {}

  [[noreturn]] void bad(const std::string& what) const {
    fail(Status::kInvalidArgument, api_, ": ", what);
  }

  // Bytes of n elements times `times`, refusing overflow.
  size_t bytes(size_t n, size_t times, const char* what) const {
    const size_t max = std::numeric_limits<size_t>::max();
    if (times != 0 && n > max / times / esize_) {
      bad(str_cat(what, " ", n, " overflows the address space for ",
                  dtype_name(a_.dtype),
                  times > 1 ? str_cat(" x ", times) : ""));
    }
    return n * times * esize_;
  }

  size_t sum(const std::vector<size_t>& counts, const char* what) const {
    size_t total = 0;
    for (size_t c : counts) {
      if (c > std::numeric_limits<size_t>::max() - total) {
        bad(str_cat("the sum of ", what, " overflows"));
      }
      total += c;
    }
    bytes(total, 1, what);
    return total;
  }

  void need(const void* p, size_t nbytes, const char* name) const {
    if (p == nullptr && nbytes != 0) {
      bad(str_cat(name, " is NULL with ", nbytes / esize_, " elements"));
    }
  }

  void rank_arg(int r, const char* name) const {
    if (r < 0 || r >= size_) {
      bad(str_cat(name, " ", r, " is out of range for a gang of size ", size_));
    }
  }

  void counts(const std::vector<size_t>& c, const char* name) const {
    if (c.size() != static_cast<size_t>(size_)) {
      bad(str_cat(name, " has ", c.size(), " entries for a gang of size ",
                  size_));
    }
  }

  // send and recv may share memory only when send starts exactly at
  // recv + in_place_offset elements (a negative offset: never).
  void overlap(const void* send, size_t sbytes, const void* recv, size_t rbytes,
               long long in_place_elems, const char* rule) const {
    if (send == nullptr || recv == nullptr || sbytes == 0 || rbytes == 0) {
      return;
    }
    const auto s = reinterpret_cast<uintptr_t>(send);
    const auto r = reinterpret_cast<uintptr_t>(recv);
    const bool disjoint = s + sbytes <= r || r + rbytes <= s;
    if (disjoint) return;
    if (in_place_elems >= 0 &&
        s == r + static_cast<uintptr_t>(in_place_elems) * esize_) {
      return;
    }
    bad(str_cat("send and recv overlap; ", rule));
  }

 private:
  const CollectiveArgs& a_;
  int rank_;
  int size_;
  const char* api_;
  size_t esize_;
};

}  // namespace

void validate(const CollectiveArgs& a, int rank, int size, bool emulated) {
  Checker c(a, rank, size);
  const size_t n = a.count;
  const size_t p = static_cast<size_t>(size);
  const bool at_root = a.root == rank;
  switch (a.kind) {
    case OpKind::kAllReduce: {
      const size_t b = c.bytes(n, 1, "count");
      c.need(a.send, b, "send");
      c.need(a.recv, b, "recv");
      c.overlap(a.send, b, a.recv, b, 0, "in place needs send == recv");
      return;
    }
    case OpKind::kReduce: {
      c.rank_arg(a.root, "root");
      const size_t b = c.bytes(n, 1, "count");
      c.need(a.send, b, "send");
      if (at_root) c.need(a.recv, b, "recv");
      c.overlap(a.send, b, a.recv, b, 0, "in place needs send == recv");
      return;
    }
    case OpKind::kBroadcast: {
      c.rank_arg(a.root, "root");
      c.need(a.recv, c.bytes(n, 1, "count"), "buf");
      return;
    }
    case OpKind::kAllGather: {
      const size_t b = c.bytes(n, 1, "count");
      const size_t rb = c.bytes(n, p, "count");
      c.need(a.send, b, "send");
      c.need(a.recv, rb, "recv");
      c.overlap(a.send, b, a.recv, rb, static_cast<long long>(rank) * n,
                "in place needs send == recv + rank*count");
      return;
    }
    case OpKind::kAllGatherV: {
      c.counts(a.recv_counts, "recv_counts");
      if (a.count != a.recv_counts[rank]) {
        c.bad(str_cat("send_count ", a.count, " differs from recv_counts[",
                      rank, "] ", a.recv_counts[rank]));
      }
      const size_t total = c.sum(a.recv_counts, "recv_counts");
      const size_t b = c.bytes(n, 1, "send_count");
      c.need(a.send, b, "send");
      c.need(a.recv, total * dtype_size(a.dtype), "recv");
      c.overlap(a.send, b, a.recv, total * dtype_size(a.dtype),
                static_cast<long long>(prefix_offsets(a.recv_counts)[rank]),
                "in place needs send == recv + sum(recv_counts[<rank])");
      return;
    }
    case OpKind::kGather: {
      c.rank_arg(a.root, "root");
      const size_t b = c.bytes(n, 1, "count");
      const size_t rb = c.bytes(n, p, "count");
      c.need(a.send, b, "send");
      if (at_root) {
        c.need(a.recv, rb, "recv");
        c.overlap(a.send, b, a.recv, rb, static_cast<long long>(rank) * n,
                  "in place needs send == recv + root*count at the root");
      }
      return;
    }
    case OpKind::kScatter: {
      c.rank_arg(a.root, "root");
      const size_t b = c.bytes(n, 1, "count");
      const size_t sb = c.bytes(n, p, "count");
      if (at_root || emulated) {
        c.need(a.send, sb, "send");
        // Here the receive buffer sits inside the send buffer.
        c.overlap(a.recv, b, a.send, sb, static_cast<long long>(rank) * n,
                  "in place needs recv == send + root*count at the root");
      }
      c.need(a.recv, b, "recv");
      return;
    }
    case OpKind::kReduceScatter: {
      const size_t b = c.bytes(n, 1, "recv_count");
      const size_t sb = c.bytes(n, p, "recv_count");
      c.need(a.send, sb, "send");
      c.need(a.recv, b, "recv");
      c.overlap(a.recv, b, a.send, sb, static_cast<long long>(rank) * n,
                "in place needs recv == send + rank*recv_count");
      return;
    }
    case OpKind::kReduceScatterV: {
      c.counts(a.recv_counts, "recv_counts");
      const size_t total = c.sum(a.recv_counts, "recv_counts");
      const size_t es = dtype_size(a.dtype);
      c.need(a.send, total * es, "send");
      c.need(a.recv, a.recv_counts[rank] * es, "recv");
      c.overlap(a.recv, a.recv_counts[rank] * es, a.send, total * es,
                static_cast<long long>(prefix_offsets(a.recv_counts)[rank]),
                "in place needs recv == send + sum(recv_counts[<rank])");
      return;
    }
    case OpKind::kAllToAll: {
      const size_t b = c.bytes(n, p, "count");
      c.need(a.send, b, "send");
      c.need(a.recv, b, "recv");
      c.overlap(a.send, b, a.recv, b, -1, "all_to_all is never in place");
      return;
    }
    case OpKind::kAllToAllV: {
      c.counts(a.send_counts, "send_counts");
      c.counts(a.recv_counts, "recv_counts");
      const size_t es = dtype_size(a.dtype);
      const size_t sb = c.sum(a.send_counts, "send_counts") * es;
      const size_t rb = c.sum(a.recv_counts, "recv_counts") * es;
      c.need(a.send, sb, "send");
      c.need(a.recv, rb, "recv");
      c.overlap(a.send, sb, a.recv, rb, -1, "all_to_allv is never in place");
      return;
    }
    case OpKind::kBarrier:
      return;
    case OpKind::kSend:
    case OpKind::kRecv: {
      // A receive from any peer (gang_recv_any) is the one with a source.
      if (a.source == nullptr) c.rank_arg(a.root, "peer");
      if (a.root == rank) {
        c.bad(str_cat("peer ", a.root, " is this rank; a rank cannot ",
                      a.kind == OpKind::kSend ? "send to" : "receive from",
                      " itself"));
      }
      if (a.tag < 0 || a.tag > kTagMax) {
        c.bad(str_cat("tag ", a.tag, " is outside [0, GANG_TAG_MAX]"));
      }
      const size_t b = c.bytes(n, 1, "count");
      c.need(a.kind == OpKind::kSend ? a.send : a.recv, b, "buf");
      return;
    }
  }
}

}  // namespace gang::core
