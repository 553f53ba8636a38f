// Posting operations: each post enqueues its NCCL calls on one stream and
// ends with an event the work tests. c10d's stream contract: before a
// collective reads its input, the stream it runs on waits for the caller's
// (the one gang_set_cuda_stream named, else the legacy default stream);
// waiting for a work makes the caller's stream wait for the result, and,
// unless the operation asked for stream completion, the host too. Works and
// their events are pooled. See nccl_instance.h for the locking and device
// rules.
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "backends/nccl/nccl_instance.h"

namespace gang::backends::nccl_impl {
namespace {

ncclDataType_t nccl_type(int32_t dtype) {
  switch (dtype) {
    case GANG_INT8: return ncclInt8;
    case GANG_UINT8: return ncclUint8;
    case GANG_INT32: return ncclInt32;
    case GANG_UINT32: return ncclUint32;
    case GANG_INT64: return ncclInt64;
    case GANG_UINT64: return ncclUint64;
    case GANG_FLOAT16: return ncclFloat16;
    case GANG_BFLOAT16: return ncclBfloat16;
    case GANG_FLOAT32: return ncclFloat32;
    case GANG_BOOL: return ncclUint8;
    case GANG_INT16: return ncclFloat16;  // moved bit for bit, never reduced
    default: return ncclFloat64;
  }
}

ncclRedOp_t nccl_op(int32_t op, int32_t dtype) {
  if (dtype == GANG_BOOL) {  // bytes of 0 or 1: "or" is max, "and" is min
    return op == GANG_PROD || op == GANG_MIN ? ncclMin : ncclMax;
  }
  switch (op) {
    case GANG_PROD: return ncclProd;
    case GANG_MIN: return ncclMin;
    case GANG_MAX: return ncclMax;
    case GANG_AVG: return ncclAvg;
    default: return ncclSum;
  }
}

size_t type_size(int32_t dtype) {
  switch (dtype) {
    case GANG_INT8:
    case GANG_UINT8:
    case GANG_BOOL: return 1;
    case GANG_FLOAT16:
    case GANG_BFLOAT16:
    case GANG_INT16: return 2;
    case GANG_INT32:
    case GANG_UINT32:
    case GANG_FLOAT32: return 4;
    default: return 8;
  }
}

// Enqueues one operation (inside the caller's group where it needs one).
ncclResult_t enqueue(Instance& in, const gang_backend_op_t& o, cudaStream_t s) {
  const Api& a = *in.api;
  const ncclDataType_t t = nccl_type(o.dtype);
  const ncclRedOp_t op = nccl_op(o.op, o.dtype);
  const size_t es = type_size(o.dtype);
  const auto* send = static_cast<const char*>(o.send);
  auto* recv = static_cast<char*>(o.recv);
  const int n = in.size;
  ncclResult_t r = ncclSuccess;
  auto keep = [&](ncclResult_t x) {
    if (r == ncclSuccess || r == ncclInProgress) r = x;
  };
  switch (o.kind) {
    case GANG_BACKEND_OP_ALL_REDUCE:
      return a.AllReduce(send, recv, o.count, t, op, in.comm, s);
    case GANG_BACKEND_OP_REDUCE:
      return a.Reduce(send, recv, o.count, t, op, o.root, in.comm, s);
    case GANG_BACKEND_OP_BROADCAST:
      return a.Broadcast(recv, recv, o.count, t, o.root, in.comm, s);
    case GANG_BACKEND_OP_ALL_GATHER:
      return a.AllGather(send, recv, o.count, t, in.comm, s);
    case GANG_BACKEND_OP_REDUCE_SCATTER:
      return a.ReduceScatter(send, recv, o.count, t, op, in.comm, s);
    case GANG_BACKEND_OP_BARRIER:
      return a.AllReduce(in.scratch, in.scratch, 1, ncclInt32, ncclSum, in.comm, s);
    case GANG_BACKEND_OP_SEND:
      return a.Send(send, o.count, t, o.root, in.comm, s);
    case GANG_BACKEND_OP_RECV:
      return a.Recv(recv, o.count, t, o.root, in.comm, s);
    case GANG_BACKEND_OP_ALL_GATHERV: {
      // One broadcast per rank, from its block of the output.
      size_t at = 0;
      for (int p = 0; p < n; ++p) {
        const size_t cnt = o.recv_counts[p];
        const char* from = p == in.rank ? send : recv + at * es;
        keep(a.Broadcast(from, recv + at * es, cnt, t, p, in.comm, s));
        at += cnt;
      }
      return r;
    }
    case GANG_BACKEND_OP_REDUCE_SCATTERV: {
      // One reduce per rank, to that rank, of its block of the input.
      size_t at = 0;
      for (int p = 0; p < n; ++p) {
        const size_t cnt = o.recv_counts[p];
        keep(a.Reduce(send + at * es, p == in.rank ? recv : nullptr, cnt, t, op, p, in.comm, s));
        at += cnt;
      }
      return r;
    }
    case GANG_BACKEND_OP_GATHER:
      if (in.rank == o.root) {
        for (int p = 0; p < n; ++p) {
          char* to = recv + static_cast<size_t>(p) * o.count * es;
          if (p != in.rank) keep(a.Recv(to, o.count, t, p, in.comm, s));
        }
        // Its own block, as a message to itself.
        keep(a.Send(send, o.count, t, in.rank, in.comm, s));
        keep(a.Recv(recv + static_cast<size_t>(in.rank) * o.count * es, o.count, t, in.rank,
                    in.comm, s));
      } else {
        keep(a.Send(send, o.count, t, o.root, in.comm, s));
      }
      return r;
    case GANG_BACKEND_OP_SCATTER:
      if (in.rank == o.root) {
        for (int p = 0; p < n; ++p) {
          keep(a.Send(send + static_cast<size_t>(p) * o.count * es, o.count, t, p, in.comm, s));
        }
      }
      keep(a.Recv(recv, o.count, t, o.root, in.comm, s));
      return r;
    case GANG_BACKEND_OP_ALL_TO_ALL:
    case GANG_BACKEND_OP_ALL_TO_ALLV: {
      size_t sat = 0, rat = 0;
      for (int p = 0; p < n; ++p) {
        const bool v = o.kind == GANG_BACKEND_OP_ALL_TO_ALLV;
        const size_t sc = v ? o.send_counts[p] : o.count;
        const size_t rc = v ? o.recv_counts[p] : o.count;
        keep(a.Send(send + sat * es, sc, t, p, in.comm, s));
        keep(a.Recv(recv + rat * es, rc, t, p, in.comm, s));
        sat += sc;
        rat += rc;
      }
      return r;
    }
    default:
      return ncclInvalidUsage;
  }
}

bool needs_group(int32_t kind) {
  switch (kind) {
    case GANG_BACKEND_OP_ALL_GATHERV:
    case GANG_BACKEND_OP_REDUCE_SCATTERV:
    case GANG_BACKEND_OP_GATHER:
    case GANG_BACKEND_OP_SCATTER:
    case GANG_BACKEND_OP_ALL_TO_ALL:
    case GANG_BACKEND_OP_ALL_TO_ALLV:
      return true;
    default:
      return false;
  }
}

// A work for a post: a recycled one, or a new one with its events. Null
// with *why on failure. Called under the device guard.
Work* take_work(Instance& in, std::string* why) {
  const Api& a = *in.api;
  {
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.pool.empty()) {
      // Works released while their operations ran come back once they end.
      for (size_t i = 0; i < in.live.size();) {
        Work* w = in.live[i];
        if (w->released && a.EventQuery(w->done) != cudaErrorNotReady) {
          in.live[i] = in.live.back();
          in.live.pop_back();
          in.pool.push_back(w);
        } else {
          ++i;
        }
      }
    }
    if (!in.pool.empty()) {
      Work* w = in.pool.back();
      in.pool.pop_back();
      return w;
    }
  }
  auto* w = new Work;
  w->inst = &in;
  cudaError_t ce = a.EventCreateWithFlags(&w->ready, cudaEventDisableTiming);
  if (ce == cudaSuccess) ce = a.EventCreateWithFlags(&w->done, cudaEventDisableTiming);
  if (ce != cudaSuccess) {
    if (w->ready != nullptr) a.EventDestroy(w->ready);
    delete w;
    *why = cuda_text(a, "creating the operation's events", ce);
    return nullptr;
  }
  return w;
}

void give_back(Instance& in, Work* w) {
  std::lock_guard<std::mutex> lock(in.mu);
  in.pool.push_back(w);
}

// Whether the stream is being captured into a CUDA graph.
bool capturing(const Api& a, cudaStream_t s) {
  if (a.StreamIsCapturing == nullptr || s == nullptr) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return a.StreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

}  // namespace

gang_status_t post(void* backend, const gang_backend_op_t* ops, size_t nops, void** work,
                   char* err, size_t err_len) {
  auto& in = *static_cast<Instance*>(backend);
  const Api& a = *in.api;
  std::string text;
  if (const gang_status_t st = in.failed(&text); st != GANG_OK) {
    say(err, err_len, text);
    return st;
  }
  const gang_backend_op_t& first = *gang_backend_op_at(ops, 0);
  for (size_t i = 0; i < nops; ++i) {
    const auto& o = *gang_backend_op_at(ops, i);
    if ((o.kind == GANG_BACKEND_OP_SEND || o.kind == GANG_BACKEND_OP_RECV) && o.tag != 0) {
      say(err, err_len, "NCCL matches messages in issue order and has no tags: tag " +
                            std::to_string(o.tag) + " is not 0");
      return GANG_ERR_UNSUPPORTED;
    }
  }
  // The caller's stream: the one the gang set, or the legacy default stream
  // (GANG_BACKEND_LEGACY_STREAM is cudaStreamLegacy). A gang that set none
  // runs on its own stream, after the legacy stream's work so far.
  const bool own = first.stream == nullptr;
  const auto caller = static_cast<cudaStream_t>(own ? cudaStreamLegacy : first.stream);
  const cudaStream_t s = own ? in.own : caller;
  const bool stream_completion =
      first.struct_size >= offsetof(gang_backend_op_t, completion) + sizeof first.completion &&
      first.completion == GANG_BACKEND_COMPLETION_STREAM;
  DeviceGuard guard(a, in.device);
  if (guard.status() != cudaSuccess) {
    const std::string why = cuda_text(a, "cudaSetDevice", guard.status());
    say(err, err_len, why);
    return GANG_ERR_SYSTEM;
  }
  // Captured into a CUDA graph: enqueued and nothing else (no event, no
  // host wait); the graph's launches run it.
  const bool captured = !own && capturing(a, s);
  Work* w = nullptr;
  auto cuda_failed = [&](const std::string& why) {
    if (w != nullptr) give_back(in, w);
    in.fail(GANG_ERR_SYSTEM, why);
    say(err, err_len, why);
    return GANG_ERR_SYSTEM;
  };
  if (!captured) {
    w = take_work(in, &text);
    if (w == nullptr) return cuda_failed(text);
    // The gang's own stream waits for the caller's, unless that has
    // nothing left to run (then what it wrote is written).
    if (own && a.StreamQuery(caller) != cudaSuccess) {
      cudaError_t ce = a.EventRecord(w->ready, caller);
      if (ce == cudaSuccess) ce = a.StreamWaitEvent(in.own, w->ready, 0);
      if (ce != cudaSuccess) return cuda_failed(cuda_text(a, "ordering after the caller's stream", ce));
    }
  }
  const bool group = nops > 1 || needs_group(first.kind);
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(in.comm_mu);
    if (in.comm_gone) r = ncclInvalidUsage;
    if (r == ncclSuccess && group) r = a.GroupStart();
    for (size_t i = 0; i < nops && r == ncclSuccess; ++i) {
      r = enqueue(in, *gang_backend_op_at(ops, i), s);
    }
    if (group && r != ncclInvalidUsage) {
      const ncclResult_t end = a.GroupEnd();
      if (r == ncclSuccess) r = end;
    }
  }
  // Since NCCL 2.23 a non-blocking communicator launches from a thread of
  // its own and says ncclInProgress: polled, yielding, not sleeping.
  if (r == ncclInProgress) r = in.poll(in.comm, first.deadline_ns);
  if (r != ncclSuccess) {
    if (w != nullptr) give_back(in, w);
    if (in.aborted.load()) {
      // Another thread failed the instance (the watchdog saw the same
      // error first) or the caller aborted it: its cause, not "aborted".
      const gang_status_t st = in.abort_cause(&text);
      say(err, err_len, text);
      return st;
    }
    const gang_status_t st = r == ncclInProgress ? GANG_ERR_TIMEOUT : status_of(r);
    const std::string why = r == ncclInProgress
                                ? std::string("enqueueing did not finish before the deadline")
                                : in.comm_text("enqueueing", r);
    in.fail(st, why);
    say(err, err_len, why);
    return st;
  }
  if (captured) {
    *work = nullptr;  // in the graph: nothing to wait for now
    return GANG_OK;
  }
  const cudaError_t ce = a.EventRecord(w->done, s);
  if (ce != cudaSuccess) return cuda_failed(cuda_text(a, "recording the operation's event", ce));
  w->caller = caller;
  w->own_stream = own;
  w->stream_completion = stream_completion;
  w->stream_waited = false;
  w->deadline_ns = first.deadline_ns;
  w->released = false;
  w->status.store(GANG_IN_PROGRESS);
  {
    std::lock_guard<std::mutex> lock(in.mu);
    in.live.push_back(w);
  }
  *work = w;
  return GANG_OK;
}

namespace {

// test() once the device guard is set.
gang_status_t test_here(Work& w, char* err, size_t err_len) {
  Instance& in = *w.inst;
  std::string text;
  const gang_status_t done = w.status.load();
  if (done != GANG_IN_PROGRESS) {
    if (done != GANG_OK) {
      in.failed(&text);
      say(err, err_len, text);
    }
    return done;
  }
  // A failed or aborted instance fails what it has not finished: its
  // event may still complete, with nothing computed.
  if (const gang_status_t st = in.failed(&text); st != GANG_OK) {
    w.status.store(st);
    say(err, err_len, text);
    return st;
  }
  const cudaError_t q = in.api->EventQuery(w.done);
  if (q == cudaSuccess) {
    // Ended on the device: it ended well unless the communicator failed.
    ncclResult_t async = ncclSuccess, r = ncclSuccess;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(in.comm_mu);
      if (!in.comm_gone) r = in.api->CommGetAsyncError(in.comm, &async);
      if (r != ncclSuccess) async = r;
      if (async != ncclSuccess && async != ncclInProgress) {
        why = nccl_text(*in.api, r != ncclSuccess ? "polling the communicator" : "the communicator failed",
                        async, in.comm);
      }
    }
    if (!why.empty()) {
      in.fail(status_of(async), why);
      w.status.store(status_of(async));
      say(err, err_len, why);
      return status_of(async);
    }
    w.status.store(GANG_OK);
    return GANG_OK;
  }
  if (q != cudaErrorNotReady) {
    const std::string why = cuda_text(*in.api, "cudaEventQuery", q);
    in.fail(GANG_ERR_SYSTEM, why);
    w.status.store(GANG_ERR_SYSTEM);
    say(err, err_len, why);
    return GANG_ERR_SYSTEM;
  }
  if (now_ns() >= w.deadline_ns) {
    const std::string why = kLate;
    in.fail(GANG_ERR_TIMEOUT, why);
    w.status.store(GANG_ERR_TIMEOUT);
    say(err, err_len, why);
    return GANG_ERR_TIMEOUT;
  }
  return GANG_IN_PROGRESS;
}

}  // namespace

gang_status_t test(void* work, char* err, size_t err_len) {
  auto& w = *static_cast<Work*>(work);
  DeviceGuard guard(*w.inst->api, w.inst->device);
  return test_here(w, err, err_len);
}

// Makes the caller's stream wait for the work (when it ran on the
// instance's own stream), then, in host completion, waits on the host until
// the work ends or until_ns: yielding for the first milliseconds, so a short
// operation's end is seen within microseconds, then in short sleeps.
gang_status_t wait(void* work, int64_t until_ns, char* err, size_t err_len) {
  auto& w = *static_cast<Work*>(work);
  Instance& in = *w.inst;
  DeviceGuard guard(*in.api, in.device);
  if (w.own_stream && !w.stream_waited) {
    const cudaError_t ce = in.api->StreamWaitEvent(w.caller, w.done, 0);
    if (ce != cudaSuccess) {
      const std::string why = cuda_text(*in.api, "ordering the caller's stream after the work", ce);
      in.fail(GANG_ERR_SYSTEM, why);
      say(err, err_len, why);
      return GANG_ERR_SYSTEM;
    }
    w.stream_waited = true;
  }
  if (w.stream_completion) {
    // The result is ordered on the caller's stream: done, as far as the
    // caller's host is concerned, unless the gang already failed.
    const gang_status_t s = test_here(w, err, err_len);
    return s == GANG_IN_PROGRESS ? GANG_OK : s;
  }
  const int64_t start = now_ns();
  for (;;) {
    const gang_status_t s = test_here(w, err, err_len);
    if (s != GANG_IN_PROGRESS) return s;
    const int64_t now = now_ns();
    if (now >= until_ns) return s;
    if (now - start < 2000000) {
      ::sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// The work goes back to the pool once its operations ended; until then the
// watchdog keeps timing it.
void work_free(void* work) {
  auto* w = static_cast<Work*>(work);
  Instance& in = *w->inst;
  std::lock_guard<std::mutex> lock(in.mu);
  w->released = true;
}

void free_pool(Instance& in) {
  std::lock_guard<std::mutex> lock(in.mu);
  for (auto* list : {&in.live, &in.pool}) {
    for (Work* w : *list) {
      if (w->ready != nullptr) in.api->EventDestroy(w->ready);
      if (w->done != nullptr) in.api->EventDestroy(w->done);
      delete w;
    }
    list->clear();
  }
}

}  // namespace gang::backends::nccl_impl
