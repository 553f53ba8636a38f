#include "backends/gloo/gloo_collectives.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/reduce.h"

namespace gang::backends::gloo_impl {

namespace {

using core::CollectiveArgs;
using core::DType;
using core::OpKind;
using core::ReduceOp;
using Millis = std::chrono::milliseconds;

// Point-to-point slots live under a prefix none of Gloo's collectives use,
// so a user's tag never meets a collective's sequence number.
constexpr uint64_t kP2PSlotPrefix = uint64_t{0x40} << 56;

// Gloo keeps raw pointers in unbound buffers; an empty buffer still needs
// one that is not null.
uint8_t g_empty;

uint8_t* bytes_ptr(void* p) {
  return p ? static_cast<uint8_t*>(p) : &g_empty;
}
uint8_t* bytes_ptr(const void* p) {
  // Gloo's option setters take non-const pointers even for inputs it only
  // reads.
  return bytes_ptr(const_cast<void*>(p));
}

std::vector<size_t> scaled(const std::vector<size_t>& counts, size_t esize) {
  std::vector<size_t> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) out[i] = counts[i] * esize;
  return out;
}

std::vector<int64_t> scaled64(const std::vector<size_t>& counts,
                              size_t esize) {
  std::vector<int64_t> out(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    out[i] = static_cast<int64_t>(counts[i] * esize);
  }
  return out;
}

// Reductions run through one element type of the dtype's width so that Gloo
// splits buffers on element boundaries; the kernel knows the real dtype.
template <typename F>
void with_element(size_t esize, F&& f) {
  switch (esize) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

::gloo::AllreduceOptions::Func reducer(DType dtype, ReduceOp op) {
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  return [dtype, partial](void* out, const void* a, const void* b, size_t n) {
    core::reduce(out, a, b, n, dtype, partial);
  };
}

void all_reduce(const std::shared_ptr<::gloo::Context>& ctx, const CollectiveArgs& a, uint32_t tag,
                Millis timeout, const void* send, void* recv) {
  with_element(core::dtype_size(a.dtype), [&](auto t) {
    using T = decltype(t);
    ::gloo::AllreduceOptions o(ctx);
    if (send != recv) o.setInput(static_cast<T*>(const_cast<void*>(send)), a.count);
    o.setOutput(static_cast<T*>(recv), a.count);
    o.setReduceFunction(reducer(a.dtype, a.op));
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::allreduce(o);
  });
  if (a.op == ReduceOp::kAvg) core::finish_avg(recv, a.count, a.dtype, ctx->size);
}

void reduce(const std::shared_ptr<::gloo::Context>& ctx, const CollectiveArgs& a, uint32_t tag,
            Millis timeout) {
  const size_t bytes = a.count * core::dtype_size(a.dtype);
  // Gloo uses the output as scratch on every rank; off root the caller may
  // have passed none.
  std::vector<uint8_t> scratch;
  void* out = a.recv;
  if (ctx->rank != a.root && out == nullptr) {
    scratch.resize(bytes);
    out = scratch.data();
  }
  with_element(core::dtype_size(a.dtype), [&](auto t) {
    using T = decltype(t);
    ::gloo::ReduceOptions o(ctx);
    if (a.send != out) o.setInput(static_cast<T*>(const_cast<void*>(a.send)), a.count);
    o.setOutput(static_cast<T*>(out), a.count);
    o.setRoot(a.root);
    o.setReduceFunction(reducer(a.dtype, a.op));
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::reduce(o);
  });
  if (a.op == ReduceOp::kAvg && ctx->rank == a.root) {
    core::finish_avg(a.recv, a.count, a.dtype, ctx->size);
  }
}

// reduce_scatter(v) is an all-reduce of the whole send buffer into scratch,
// of which each rank keeps its own chunk: correct and bitwise consistent,
// at twice the traffic of a ring reduce-scatter.
void reduce_scatter(const std::shared_ptr<::gloo::Context>& ctx, const CollectiveArgs& a,
                    uint32_t tag, Millis timeout) {
  const size_t es = core::dtype_size(a.dtype);
  size_t total = 0, offset = 0, mine = 0;
  if (a.kind == OpKind::kReduceScatter) {
    total = a.count * static_cast<size_t>(ctx->size);
    offset = a.count * static_cast<size_t>(ctx->rank);
    mine = a.count;
  } else {
    for (size_t i = 0; i < a.recv_counts.size(); ++i) {
      if (static_cast<int>(i) < ctx->rank) offset += a.recv_counts[i];
      total += a.recv_counts[i];
    }
    mine = a.recv_counts[static_cast<size_t>(ctx->rank)];
  }
  if (total == 0) return;
  std::vector<uint8_t> scratch(total * es);
  CollectiveArgs whole = a;
  whole.count = total;
  all_reduce(ctx, whole, tag, timeout, a.send, scratch.data());
  std::memmove(a.recv, scratch.data() + offset * es, mine * es);
}

}  // namespace

void run_collective(const std::shared_ptr<::gloo::Context>& ctx, const CollectiveArgs& a,
                    uint32_t tag, Millis timeout) {
  const size_t es = core::dtype_size(a.dtype);
  const size_t bytes = a.count * es;
  const size_t p = static_cast<size_t>(ctx->size);
  switch (a.kind) {
    case OpKind::kAllReduce:
      if (a.count != 0) all_reduce(ctx, a, tag, timeout, a.send, a.recv);
      return;
    case OpKind::kReduce:
      if (a.count != 0) reduce(ctx, a, tag, timeout);
      return;
    case OpKind::kReduceScatter:
    case OpKind::kReduceScatterV:
      reduce_scatter(ctx, a, tag, timeout);
      return;
    case OpKind::kBroadcast: {
      if (bytes == 0) return;
      ::gloo::BroadcastOptions o(ctx);
      o.setOutput(bytes_ptr(a.recv), bytes);
      o.setRoot(a.root);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::broadcast(o);
      return;
    }
    case OpKind::kAllGather: {
      if (bytes == 0) return;
      ::gloo::AllgatherOptions o(ctx);
      o.setInput(bytes_ptr(a.send), bytes);
      o.setOutput(bytes_ptr(a.recv), bytes * p);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::allgather(o);
      return;
    }
    case OpKind::kAllGatherV: {
      ::gloo::AllgathervOptions o(ctx);
      o.setInput(bytes_ptr(a.send), bytes);
      o.setOutput(bytes_ptr(a.recv), scaled(a.recv_counts, es));
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::allgatherv(o);
      return;
    }
    case OpKind::kGather: {
      if (bytes == 0) return;
      ::gloo::GatherOptions o(ctx);
      o.setInput(bytes_ptr(a.send), bytes);
      if (ctx->rank == a.root) o.setOutput(bytes_ptr(a.recv), bytes * p);
      o.setRoot(a.root);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::gather(o);
      return;
    }
    case OpKind::kScatter: {
      if (bytes == 0) return;
      ::gloo::ScatterOptions o(ctx);
      if (ctx->rank == a.root) {
        std::vector<uint8_t*> chunks(p);
        for (size_t r = 0; r < p; ++r) chunks[r] = bytes_ptr(a.send) + r * bytes;
        o.setInputs(chunks, bytes);
      }
      o.setOutput(bytes_ptr(a.recv), bytes);
      o.setRoot(a.root);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::scatter(o);
      return;
    }
    case OpKind::kAllToAll: {
      if (bytes == 0) return;
      ::gloo::AlltoallOptions o(ctx);
      o.setInput(bytes_ptr(a.send), bytes * p);
      o.setOutput(bytes_ptr(a.recv), bytes * p);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::alltoall(o);
      return;
    }
    case OpKind::kAllToAllV: {
      ::gloo::AlltoallvOptions o(ctx);
      o.setInput(bytes_ptr(a.send), scaled64(a.send_counts, es));
      o.setOutput(bytes_ptr(a.recv), scaled64(a.recv_counts, es));
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::alltoallv(o);
      return;
    }
    case OpKind::kBarrier: {
      ::gloo::BarrierOptions o(ctx);
      o.setTag(tag);
      o.setTimeout(timeout);
      ::gloo::barrier(o);
      return;
    }
    case OpKind::kSend:
    case OpKind::kRecv:
      break;
  }
  fail(Status::kInternal, core::op_api_name(a.kind),
       " reached the collective path");
}

PostedP2P post_p2p(const std::shared_ptr<::gloo::Context>& ctx, const CollectiveArgs& a) {
  PostedP2P posted;
  const size_t bytes = a.count * core::dtype_size(a.dtype);
  if (bytes == 0) return posted;  // both sides know the count: nothing to move
  const uint64_t slot = kP2PSlotPrefix | static_cast<uint32_t>(a.tag);
  posted.is_send = a.kind == OpKind::kSend;
  if (posted.is_send) {
    posted.buffer = ctx->createUnboundBuffer(bytes_ptr(a.send), bytes);
    posted.buffer->send(a.root, slot);
  } else {
    posted.buffer = ctx->createUnboundBuffer(bytes_ptr(a.recv), bytes);
    posted.buffer->recv(a.root, slot);
  }
  return posted;
}

void finish_p2p(PostedP2P& posted, Millis timeout) {
  if (!posted.buffer) return;
  const bool done = posted.is_send ? posted.buffer->waitSend(timeout)
                                   : posted.buffer->waitRecv(timeout);
  if (!done) fail(Status::kAborted, "the transfer was aborted");
}

}  // namespace gang::backends::gloo_impl
