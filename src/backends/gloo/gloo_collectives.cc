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
#include <gloo/types.h>

#include <cstring>
#include <vector>

#include "base/error.h"
#include "core/collective.h"
#include "core/reduce.h"

namespace gang::backends::gloo_impl {

namespace {

using core::CollectiveArgs;
using core::DType;
using core::OpKind;
using core::ReduceOp;
using Millis = std::chrono::milliseconds;

// Point-to-point slots live under a prefix none of Gloo's collectives use,
// so a user's tag never meets a collective's sequence number; gang's own
// algorithms take the next prefixes.
constexpr uint64_t kP2PSlotPrefix = uint64_t{0x40} << 56;
constexpr uint8_t kDirectAllReducePrefix = 0x41;
constexpr uint8_t kReduceScatterPrefix = 0x42;
// The core's own point-to-point traffic (byte payloads).
constexpr uint64_t kControlP2PSlotPrefix = uint64_t{0x43} << 56;

// Below this many bytes received per rank, all-reduce exchanges whole
// buffers in one round instead of running Gloo's ring: a small message then
// costs one network hop instead of 2(n-1) dependent ones.
constexpr size_t kDirectAllReduceBytes = 256 * 1024;

// Gloo keeps raw pointers in unbound buffers; an empty buffer still needs
// one that is not null.
uint8_t g_empty;

uint8_t* bytes_ptr(void* p) { return p ? static_cast<uint8_t*>(p) : &g_empty; }
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

std::vector<int64_t> scaled64(const std::vector<size_t>& counts, size_t esize) {
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
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    default:
      return f(uint64_t{});
  }
}

::gloo::AllreduceOptions::Func reducer(DType dtype, ReduceOp op) {
  const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  return [dtype, partial](void* out, const void* a, const void* b, size_t n) {
    core::reduce(out, a, b, n, dtype, partial);
  };
}

// Every rank sends its whole input to every peer, then reduces the n inputs
// in rank order, so every rank computes the same bits.
void direct_all_reduce(const std::shared_ptr<::gloo::Context>& ctx,
                       const CollectiveArgs& a, uint32_t tag, Millis timeout,
                       const void* send, void* recv) {
  const size_t bytes = a.count * core::dtype_size(a.dtype);
  const size_t n = static_cast<size_t>(ctx->size);
  const size_t me = static_cast<size_t>(ctx->rank);
  const uint64_t slot = ::gloo::Slot::build(kDirectAllReducePrefix, tag);
  std::vector<uint8_t> all(n * bytes);
  std::memcpy(all.data() + me * bytes, send, bytes);
  auto in = ctx->createUnboundBuffer(all.data(), all.size());
  auto out = ctx->createUnboundBuffer(all.data() + me * bytes, bytes);
  for (size_t p = 0; p < n; ++p) {
    if (p == me) continue;
    in->recv(static_cast<int>(p), slot, p * bytes, bytes);
    out->send(static_cast<int>(p), slot);
  }
  for (size_t i = 1; i < n; ++i) {
    if (!in->waitRecv(timeout) || !out->waitSend(timeout)) {
      fail(Status::kAborted, "the transfer was aborted");
    }
  }
  const ReduceOp partial = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
  std::memcpy(recv, all.data(), bytes);
  for (size_t p = 1; p < n; ++p) {
    core::reduce(recv, recv, all.data() + p * bytes, a.count, a.dtype, partial);
  }
}

void all_reduce(const std::shared_ptr<::gloo::Context>& ctx,
                const CollectiveArgs& a, uint32_t tag, Millis timeout,
                const void* send, void* recv) {
  const size_t bytes = a.count * core::dtype_size(a.dtype);
  if (bytes * static_cast<size_t>(ctx->size - 1) <= kDirectAllReduceBytes) {
    direct_all_reduce(ctx, a, tag, timeout, send, recv);
    if (a.op == ReduceOp::kAvg)
      core::finish_avg(recv, a.count, a.dtype, ctx->size);
    return;
  }
  with_element(core::dtype_size(a.dtype), [&](auto t) {
    using T = decltype(t);
    ::gloo::AllreduceOptions o(ctx);
    if (send != recv)
      o.setInput(static_cast<T*>(const_cast<void*>(send)), a.count);
    o.setOutput(static_cast<T*>(recv), a.count);
    o.setReduceFunction(reducer(a.dtype, a.op));
    o.setTag(tag);
    o.setTimeout(timeout);
    ::gloo::allreduce(o);
  });
  if (a.op == ReduceOp::kAvg)
    core::finish_avg(recv, a.count, a.dtype, ctx->size);
}

void reduce(const std::shared_ptr<::gloo::Context>& ctx,
            const CollectiveArgs& a, uint32_t tag, Millis timeout) {
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
    if (a.send != out)
      o.setInput(static_cast<T*>(const_cast<void*>(a.send)), a.count);
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

// A ring: in step s every rank passes its running sum of chunk (r-s-1) to
// its right neighbour and folds the chunk arriving from its left into its
// own running sum, so after n-1 steps rank r holds chunk r fully reduced.
// Each rank sends (n-1)/n of the buffer, as Gloo's ring all-reduce does in
// its first half.
void reduce_scatter(const std::shared_ptr<::gloo::Context>& ctx,
                    const CollectiveArgs& a, uint32_t tag, Millis timeout) {
  const size_t es = core::dtype_size(a.dtype);
  const size_t n = static_cast<size_t>(ctx->size);
  const size_t me = static_cast<size_t>(ctx->rank);
  std::vector<size_t> counts = a.recv_counts;
  if (a.kind == OpKind::kReduceScatter) counts.assign(n, a.count);
  const std::vector<size_t> offsets = core::prefix_offsets(counts);
  const size_t total = offsets.back() + counts.back();
  if (total == 0) return;

  std::vector<uint8_t> acc(static_cast<const uint8_t*>(a.send),
                           static_cast<const uint8_t*>(a.send) + total * es);
  size_t largest = 0;
  for (size_t c : counts) largest = c > largest ? c : largest;
  std::vector<uint8_t> incoming(largest * es);
  auto acc_buf = ctx->createUnboundBuffer(acc.data(), acc.size());
  auto in_buf =
      ctx->createUnboundBuffer(bytes_ptr(incoming.data()), incoming.size());
  const int right = static_cast<int>((me + 1) % n);
  const int left = static_cast<int>((me + n - 1) % n);
  const ReduceOp partial = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
  for (size_t s = 0; s + 1 < n; ++s) {
    // Each step has its own slot, so a fast neighbour's next chunk can never
    // land in this step's receive.
    const uint64_t slot = ::gloo::Slot::build(kReduceScatterPrefix, tag) +
                          static_cast<uint8_t>(s % 256);
    const size_t out_idx = (me + 2 * n - s - 1) % n;
    const size_t in_idx = (me + 2 * n - s - 2) % n;
    const bool sends = counts[out_idx] != 0, receives = counts[in_idx] != 0;
    if (receives) in_buf->recv(left, slot, 0, counts[in_idx] * es);
    if (sends)
      acc_buf->send(right, slot, offsets[out_idx] * es, counts[out_idx] * es);
    if ((receives && !in_buf->waitRecv(timeout)) ||
        (sends && !acc_buf->waitSend(timeout))) {
      fail(Status::kAborted, "the transfer was aborted");
    }
    if (receives) {
      uint8_t* dst = acc.data() + offsets[in_idx] * es;
      core::reduce(dst, dst, incoming.data(), counts[in_idx], a.dtype, partial);
    }
  }
  std::memmove(a.recv, acc.data() + offsets[me] * es, counts[me] * es);
  if (a.op == ReduceOp::kAvg)
    core::finish_avg(a.recv, counts[me], a.dtype, ctx->size);
}

}  // namespace

void run_collective(const std::shared_ptr<::gloo::Context>& ctx,
                    const CollectiveArgs& a, uint32_t tag, Millis timeout) {
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
        for (size_t r = 0; r < p; ++r)
          chunks[r] = bytes_ptr(a.send) + r * bytes;
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

uint32_t wire_tag(const core::Operation& op) {
  return (static_cast<uint32_t>(op.seq) & 0x3fffffffu) |
         (static_cast<uint32_t>(op.channel) << 30);
}

void rethrow_gloo(const ::gloo::Exception& e, core::Clock::time_point deadline,
                  bool aborted) {
  if (aborted) fail(Status::kAborted, "the gang was aborted");
  const std::string what = e.what();
  // Gloo reports a timeout and a broken connection with the same exception
  // type; the deadline tells them apart.
  if (core::Clock::now() >= deadline - Millis(50) ||
      what.find("Timed out") != std::string::npos) {
    fail(Status::kTimeout, "timed out: ", what);
  }
  fail(Status::kPeerLost, "lost a peer: ", what);
}

GlooP2PWork::GlooP2PWork(
    std::unique_ptr<::gloo::transport::UnboundBuffer> buffer, bool is_send,
    core::Clock::time_point deadline,
    std::shared_ptr<std::atomic<bool>> aborted)
    : buffer_(std::move(buffer)),
      is_send_(is_send),
      deadline_(deadline),
      aborted_(std::move(aborted)) {}

GlooP2PWork::~GlooP2PWork() {
  if (waiter_.joinable()) waiter_.join();
}

void GlooP2PWork::await() {
  Status status = Status::kOk;
  std::string what;
  try {
    try {
      const auto left = std::chrono::duration_cast<Millis>(
          deadline_ - core::Clock::now());
      if (left.count() <= 0) {
        fail(Status::kTimeout,
             "the gang's timeout passed before the transfer ended");
      }
      const bool ok =
          is_send_ ? buffer_->waitSend(left) : buffer_->waitRecv(left);
      if (!ok) fail(Status::kAborted, "the transfer was aborted");
    } catch (const ::gloo::Exception& e) {
      rethrow_gloo(e, deadline_, aborted_->load());
    }
  } catch (const Error& e) {
    status = e.status();
    what = e.what();
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  status_ = status;
  what_ = what;
  cv_.notify_all();
}

bool GlooP2PWork::outcome_locked() {
  if (!done_) return false;
  if (status_ != Status::kOk) throw Error(status_, what_);
  return true;
}

bool GlooP2PWork::test() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!claimed_) {
    claimed_ = true;
    waiter_ = std::thread([this] { await(); });
  }
  return outcome_locked();
}

bool GlooP2PWork::wait(core::Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!claimed_) {
    claimed_ = true;
    if (until >= deadline_) {
      // Nothing to give up before the deadline: wait right here.
      lock.unlock();
      await();
      lock.lock();
      return outcome_locked();
    }
    waiter_ = std::thread([this] { await(); });
  }
  cv_.wait_until(lock, until, [this] { return done_; });
  return outcome_locked();
}

core::BackendWorkPtr post_p2p(const std::shared_ptr<::gloo::Context>& ctx,
                              const core::Operation& op,
                              std::shared_ptr<std::atomic<bool>> aborted) {
  const CollectiveArgs& a = op.args;
  const size_t bytes = a.count * core::dtype_size(a.dtype);
  if (bytes == 0) return nullptr;  // both sides know the count
  const uint64_t prefix = op.channel == core::Channel::kControl
                              ? kControlP2PSlotPrefix
                              : kP2PSlotPrefix;
  const uint64_t slot = prefix | static_cast<uint32_t>(a.tag);
  const bool is_send = a.kind == OpKind::kSend;
  std::unique_ptr<::gloo::transport::UnboundBuffer> buffer;
  try {
    if (is_send) {
      buffer = ctx->createUnboundBuffer(bytes_ptr(a.send), bytes);
      buffer->send(a.root, slot);
    } else {
      buffer = ctx->createUnboundBuffer(bytes_ptr(a.recv), bytes);
      buffer->recv(a.root, slot);
    }
  } catch (const ::gloo::Exception& e) {
    rethrow_gloo(e, op.deadline, aborted->load());
  }
  return std::make_unique<GlooP2PWork>(std::move(buffer), is_send, op.deadline,
                                       std::move(aborted));
}

}  // namespace gang::backends::gloo_impl
