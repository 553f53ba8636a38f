#include "core/local_collective.h"

#include <algorithm>
#include <cstring>

#include "base/copy.h"
#include "base/error.h"
#include "core/reduce.h"

namespace gang::core {

namespace {

unsigned char* at(void* p, size_t elems, size_t esize) {
  return static_cast<unsigned char*>(p) + elems * esize;
}
const unsigned char* at(const void* p, size_t elems, size_t esize) {
  return static_cast<const unsigned char*>(p) + elems * esize;
}

// Copies n elements unless source and destination are the same place.
void copy(void* dst, const void* src, size_t n, size_t esize) {
  base::move_bytes(dst, src, n * esize);
}

}  // namespace

void run_local(const CollectiveArgs& a, int rank, int size) {
  const size_t es = dtype_size(a.dtype);
  const size_t n = a.count;
  const size_t p = static_cast<size_t>(size);
  switch (a.kind) {
    case OpKind::kAllReduce:
      reduce_copies(a.recv, a.send, n, a.dtype, a.op, size);
      return;
    case OpKind::kReduce:
      if (a.root == rank) reduce_copies(a.recv, a.send, n, a.dtype, a.op, size);
      return;
    case OpKind::kBroadcast:
    case OpKind::kBarrier:
      return;
    case OpKind::kAllGather:
      for (size_t r = 0; r < p; ++r) copy(at(a.recv, r * n, es), a.send, n, es);
      return;
    case OpKind::kGather:
      if (a.root != rank) return;
      for (size_t r = 0; r < p; ++r) copy(at(a.recv, r * n, es), a.send, n, es);
      return;
    case OpKind::kAllGatherV: {
      // Rank r's slot holds as much of the input as fits in it.
      const auto off = prefix_offsets(a.recv_counts);
      for (size_t r = 0; r < p; ++r) {
        copy(at(a.recv, off[r], es), a.send, std::min(a.recv_counts[r], n), es);
      }
      return;
    }
    case OpKind::kScatter:
      copy(a.recv, at(a.send, size_t(rank) * n, es), n, es);
      return;
    case OpKind::kReduceScatter:
      reduce_copies(a.recv, at(a.send, size_t(rank) * n, es), n, a.dtype, a.op,
                    size);
      return;
    case OpKind::kReduceScatterV: {
      const auto off = prefix_offsets(a.recv_counts);
      reduce_copies(a.recv, at(a.send, off[rank], es), a.recv_counts[rank],
                    a.dtype, a.op, size);
      return;
    }
    case OpKind::kAllToAll:
      // Every peer sends this rank its chunk `rank`, and every peer is us.
      for (size_t r = 0; r < p; ++r) {
        copy(at(a.recv, r * n, es), at(a.send, size_t(rank) * n, es), n, es);
      }
      return;
    case OpKind::kAllToAllV: {
      const auto soff = prefix_offsets(a.send_counts);
      const auto roff = prefix_offsets(a.recv_counts);
      const size_t mine = a.send_counts[rank];
      for (size_t r = 0; r < p; ++r) {
        copy(at(a.recv, roff[r], es), at(a.send, soff[rank], es),
             std::min(a.recv_counts[r], mine), es);
      }
      return;
    }
    case OpKind::kSend:
    case OpKind::kRecv:
      fail(Status::kUnsupported, op_api_name(a.kind),
           ": a gang without peers has no one to talk to");
  }
}

}  // namespace gang::core
