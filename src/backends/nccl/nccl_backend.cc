// libgang-nccl.so: gang's backend for CUDA gangs, over NCCL. A module
// (include/gang/gang_backend.h): it needs gang's public headers and the
// CUDA/NCCL headers to build, and loads libcudart and libnccl itself
// (nccl_api.cc), so a machine without them gets GANG_ERR_UNAVAILABLE naming
// the missing one.
//
// One instance per gang and process: a non-blocking NCCL communicator
// (ncclConfig_t.blocking = 0; its unique id travels through the gang's
// store, or ncclCommSplit of the parent's for a split), a stream of its own
// for gangs that set none, and a watchdog thread. Operations are enqueued on the gang's stream; each post ends with
// an event, which the work tests. The watchdog polls the communicator's
// asynchronous error and every live work's deadline; on an error or a
// deadline it aborts the communicator and reports the failure (poll_error).
// Telling the other ranks is the core's: it posts the failure through its
// control channel, and their gangs abort their communicators in turn.
#include <gang/gang_backend.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/nccl/nccl_api.h"

namespace gang::backends::nccl_impl {
namespace {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void say(char* err, size_t len, const std::string& text) {
  if (err != nullptr && len > 0) std::snprintf(err, len, "%s", text.c_str());
}

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

struct Instance;

struct Work {
  Instance* inst;
  cudaEvent_t event = nullptr;
  cudaStream_t stream;
  bool own_stream;  // enqueued on the instance's stream, not the user's
  int64_t deadline_ns;
  std::atomic<int> status{GANG_IN_PROGRESS};
  bool stream_waited = false;
};

struct Instance {
  const Api* api = nullptr;
  int rank = 0, size = 1, device = 0;
  std::string name;
  ncclComm_t comm = nullptr;
  cudaStream_t own = nullptr;
  int* scratch = nullptr;  // a device int for barriers

  std::mutex comm_mu;  // held while the communicator is used
  std::atomic<bool> aborted{false};
  bool comm_gone = false;  // aborted or destroyed (under comm_mu)

  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  std::vector<Work*> live;
  int error = GANG_OK;
  std::string error_text;
  bool stop = false;
  std::thread watchdog;

  // The first failure wins; aborts the communicator.
  void fail(int status, const std::string& text) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (error != GANG_OK) return;
      error = status;
      error_text = text;
    }
    aborted.store(true);
    abort_comm();
    cv.notify_all();
  }

  void abort_comm() {
    std::lock_guard<std::mutex> lock(comm_mu);
    if (!comm_gone && comm != nullptr) {
      api->CommAbort(comm);
      comm_gone = true;
    }
  }

  int failed(std::string* text) {
    std::lock_guard<std::mutex> lock(mu);
    if (text != nullptr) *text = error_text;
    return error;
  }

  void watch();
};

const char kLate[] = "an operation enqueued on the GPU did not finish before its deadline";

int status_of(ncclResult_t r) {
  return r == ncclRemoteError ? GANG_ERR_PEER_LOST : GANG_ERR_SYSTEM;
}

// The watchdog: every 5 ms the communicator's asynchronous error and the
// live works' deadlines.
void Instance::watch() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return stop; });
      if (stop) return;
      if (error != GANG_OK) continue;
    }
    ncclResult_t async = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(comm_mu);
      if (comm_gone) continue;
      api->CommGetAsyncError(comm, &async);
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(status_of(async), nccl_text(*api, "the communicator failed", async));
      continue;
    }
    const int64_t now = now_ns();
    std::string late;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (Work* w : live) {
        if (w->status.load() != GANG_IN_PROGRESS || now < w->deadline_ns) continue;
        if (api->EventQuery(w->event) == cudaSuccess) continue;
        late = kLate;
      }
    }
    if (!late.empty()) fail(GANG_ERR_TIMEOUT, late);
  }
}

// ---- the table's functions ---------------------------------------------------

int probe(char* why, size_t why_len) {
  std::string reason;
  const Api* api = load_api(&reason);
  if (api == nullptr) {
    say(why, why_len, reason);
    return 1;
  }
  int count = 0;
  const cudaError_t e = api->GetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    say(why, why_len,
        "no CUDA device is visible" +
            (e != cudaSuccess ? " (" + cuda_text(*api, "cudaGetDeviceCount", e) + ")"
                              : std::string()));
    return 1;
  }
  return 0;
}

// Waits for a non-blocking communicator call to finish; the status, with
// the text in *text on failure.
ncclResult_t settle(Instance& in, ncclComm_t comm, int64_t deadline_ns) {
  for (;;) {
    ncclResult_t async = ncclSuccess;
    in.api->CommGetAsyncError(comm, &async);
    if (async != ncclInProgress) return async;
    if (now_ns() >= deadline_ns || in.aborted.load()) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void destroy(void* backend);

// The part of an instance that create and split share: the device, a stream
// of its own and the barrier's scratch int. Null with *status and *why set.
Instance* prepare(const Api* api, const gang_backend_config_t* c, int device, int* status,
                  std::string* why) {
  auto* in = new Instance;
  in->api = api;
  in->rank = c->rank;
  in->size = c->size;
  in->name = c->gang_name;
  in->device = device;
  auto fail = [&](int st, const std::string& text) -> Instance* {
    *status = st;
    *why = text;
    destroy(in);
    return nullptr;
  };
  cudaError_t ce = api->SetDevice(in->device);
  if (ce != cudaSuccess) return fail(GANG_ERR_UNAVAILABLE, cuda_text(*api, "cudaSetDevice", ce));
  ce = api->StreamCreateWithFlags(&in->own, cudaStreamNonBlocking);
  if (ce != cudaSuccess) return fail(GANG_ERR_SYSTEM, cuda_text(*api, "cudaStreamCreate", ce));
  ce = api->Malloc(reinterpret_cast<void**>(&in->scratch), sizeof(int));
  if (ce != cudaSuccess) return fail(GANG_ERR_NO_MEMORY, cuda_text(*api, "cudaMalloc", ce));
  return in;
}

// Waits for the new communicator of a non-blocking init or split (r is
// what the call returned), then starts the watchdog. GANG_OK, or the error
// with the instance destroyed.
gang_status_t commit(Instance* in, ncclResult_t r, const char* call, int64_t timeout_ms,
                     char* err, size_t err_len) {
  const Api& api = *in->api;
  if (r == ncclSuccess || r == ncclInProgress) {
    r = settle(*in, in->comm, now_ns() + timeout_ms * 1000000);
  }
  if (r != ncclSuccess) {
    if (in->comm != nullptr) {
      api.CommAbort(in->comm);
      in->comm_gone = true;
    }
    say(err, err_len,
        r == ncclInProgress ? "the communicator was not ready before the timeout (" +
                                  std::to_string(timeout_ms) + " ms)"
                            : nccl_text(api, call, r));
    destroy(in);
    return r == ncclInProgress ? GANG_ERR_TIMEOUT : static_cast<gang_status_t>(status_of(r));
  }
  in->watchdog = std::thread([in] { in->watch(); });
  return GANG_OK;
}

gang_status_t create(const gang_backend_config_t* c, void** out, char* err, size_t err_len) {
  std::string why;
  const Api* api = load_api(&why);
  if (api == nullptr) {
    say(err, err_len, why);
    return GANG_ERR_UNAVAILABLE;
  }
  int count = 0;
  if (api->GetDeviceCount(&count) != cudaSuccess || count <= 0) {
    say(err, err_len, "no CUDA device is visible");
    return GANG_ERR_UNAVAILABLE;
  }
  // device_index -1: local_rank % visible devices; a split keeps its
  // parent's device.
  const int local = c->local_rank >= 0 ? c->local_rank : c->rank;
  int device = c->device_index >= 0 ? c->device_index : local % count;
  if (c->parent != nullptr) device = static_cast<Instance*>(c->parent)->device;
  if (device >= count) {
    say(err, err_len,
        "device " + std::to_string(device) + " of " + std::to_string(count) +
            " visible does not exist");
    return GANG_ERR_UNAVAILABLE;
  }
  if (c->size > 1 && c->store == nullptr) {
    say(err, err_len, "no store to meet through");
    return GANG_ERR_INTERNAL;
  }
  int status = GANG_OK;
  Instance* in = prepare(api, c, device, &status, &why);
  if (in == nullptr) {
    say(err, err_len, why);
    return static_cast<gang_status_t>(status);
  }
  auto fail = [&](int st, const std::string& text) {
    say(err, err_len, text);
    destroy(in);
    return static_cast<gang_status_t>(st);
  };

  // The unique id: made by rank 0, read by the others from the store.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  char e[512];
  if (c->rank == 0) {
    const ncclResult_t r = api->GetUniqueId(&id);
    if (r != ncclSuccess) return fail(GANG_ERR_SYSTEM, nccl_text(*api, "ncclGetUniqueId", r));
    if (c->size > 1) {
      const gang_status_t st = c->store->set(c->store->ctx, "nccl_id", &id, sizeof id, e, sizeof e);
      if (st != GANG_OK) return fail(st, std::string("publishing the unique id: ") + e);
    }
  } else {
    void* data = nullptr;
    size_t len = 0;
    const gang_status_t st = c->store->get(c->store->ctx, "nccl_id", -1, &data, &len, e, sizeof e);
    if (st != GANG_OK) return fail(st, std::string("reading rank 0's unique id: ") + e);
    if (len == sizeof id) std::memcpy(&id, data, sizeof id);
    std::free(data);
    if (len != sizeof id) return fail(GANG_ERR_STORE, "rank 0's unique id has a wrong size");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = api->CommInitRankConfig(&in->comm, c->size, id, c->rank, &config);
  const gang_status_t st = commit(in, r, "ncclCommInitRankConfig", c->timeout_ms, err, err_len);
  if (st == GANG_OK) *out = in;
  return st;
}

// ncclCommSplit, on every rank of the parent (NCCL_SPLIT_NOCOLOR for a rank
// that stays out). The parent's operations are all enqueued by now, and the
// watchdog is the only other user of its communicator.
gang_status_t split(void* parent, const gang_backend_config_t* c, void** out, char* err,
                    size_t err_len) {
  auto& p = *static_cast<Instance*>(parent);
  const Api* api = p.api;
  if (api->CommSplit == nullptr) {
    say(err, err_len,
        "this NCCL (" + std::to_string(api->nccl_version) + ") has no ncclCommSplit");
    return GANG_ERR_UNSUPPORTED;
  }
  if (p.aborted.load()) {
    say(err, err_len, "the parent gang was aborted");
    return GANG_ERR_ABORTED;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (c->color < 0) {
    ncclComm_t none = nullptr;
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> lock(p.comm_mu);
      r = api->CommSplit(p.comm, NCCL_SPLIT_NOCOLOR, c->key, &none, &config);
    }
    if (r == ncclSuccess || r == ncclInProgress) {
      r = settle(p, p.comm, now_ns() + c->timeout_ms * 1000000);
    }
    if (r == ncclSuccess) return GANG_OK;
    say(err, err_len, r == ncclInProgress ? std::string("ncclCommSplit did not finish in time")
                                          : nccl_text(*api, "ncclCommSplit", r));
    return r == ncclInProgress ? GANG_ERR_TIMEOUT : static_cast<gang_status_t>(status_of(r));
  }
  int status = GANG_OK;
  std::string why;
  Instance* in = prepare(api, c, p.device, &status, &why);
  if (in == nullptr) {
    say(err, err_len, why);
    return static_cast<gang_status_t>(status);
  }
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(p.comm_mu);
    r = api->CommSplit(p.comm, c->color, c->key, &in->comm, &config);
  }
  const gang_status_t st = commit(in, r, "ncclCommSplit", c->timeout_ms, err, err_len);
  if (st == GANG_OK) *out = in;
  return st;
}

void destroy(void* backend) {
  auto* in = static_cast<Instance*>(backend);
  if (in == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(in->mu);
    in->stop = true;
  }
  in->cv.notify_all();
  if (in->watchdog.joinable()) in->watchdog.join();
  {
    std::lock_guard<std::mutex> lock(in->comm_mu);
    if (in->comm != nullptr && !in->comm_gone) {
      in->api->CommDestroy(in->comm);
      in->comm_gone = true;
    }
  }
  if (in->own != nullptr) in->api->StreamDestroy(in->own);
  if (in->scratch != nullptr) in->api->Free(in->scratch);
  delete in;
}

// NCCL reduces no int16; bool reduces as uint8 with max ("or") and min
// ("and"). Only floating types are averaged, as gang's core decides.
int supports(void*, gang_op_t op, gang_dtype_t dtype) {
  if (op < GANG_SUM || op > GANG_AVG) return 0;
  if (op == GANG_AVG) return dtype >= GANG_FLOAT16 && dtype <= GANG_FLOAT64;
  if (dtype == GANG_BOOL) return 1;
  return dtype >= GANG_INT8 && dtype <= GANG_FLOAT64;
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

gang_status_t post(void* backend, const gang_backend_op_t* ops, size_t nops, void** work,
                   char* err, size_t err_len) {
  auto& in = *static_cast<Instance*>(backend);
  const Api& a = *in.api;
  std::string text;
  if (const int st = in.failed(&text)) {
    say(err, err_len, text);
    return static_cast<gang_status_t>(st);
  }
  const gang_backend_op_t& first = *gang_backend_op_at(ops, 0);
  // The user's stream (GANG_BACKEND_LEGACY_STREAM is cudaStreamLegacy), or
  // the instance's own when the gang set none.
  cudaStream_t s = first.stream != nullptr ? static_cast<cudaStream_t>(first.stream) : in.own;
  for (size_t i = 0; i < nops; ++i) {
    const auto& o = *gang_backend_op_at(ops, i);
    if ((o.kind == GANG_BACKEND_OP_SEND || o.kind == GANG_BACKEND_OP_RECV) && o.tag != 0) {
      say(err, err_len, "NCCL matches messages in issue order and has no tags: tag " +
                            std::to_string(o.tag) + " is not 0");
      return GANG_ERR_UNSUPPORTED;
    }
  }
  const bool group = nops > 1 || needs_group(first.kind);
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(in.comm_mu);
    if (in.comm_gone) {
      say(err, err_len, "the communicator was aborted");
      return GANG_ERR_ABORTED;
    }
    a.SetDevice(in.device);
    if (group) a.GroupStart();
    for (size_t i = 0; i < nops && (r == ncclSuccess || r == ncclInProgress); ++i) {
      r = enqueue(in, *gang_backend_op_at(ops, i), s);
    }
    if (group) {
      const ncclResult_t end = a.GroupEnd();
      if (r == ncclSuccess || r == ncclInProgress) r = end;
    }
    if (r == ncclInProgress) r = settle(in, in.comm, first.deadline_ns);
  }
  if (r != ncclSuccess) {
    if (in.aborted.load()) {
      say(err, err_len, "the gang was aborted");
      return GANG_ERR_ABORTED;
    }
    const int st = r == ncclInProgress ? GANG_ERR_TIMEOUT : status_of(r);
    const std::string why = r == ncclInProgress
                                ? std::string("enqueueing did not finish before the deadline")
                                : nccl_text(a, "enqueueing", r);
    in.fail(st, why);
    say(err, err_len, why);
    return static_cast<gang_status_t>(st);
  }
  auto* w = new Work;
  w->inst = &in;
  w->stream = s;
  w->own_stream = s == in.own;
  w->deadline_ns = first.deadline_ns;
  cudaError_t ce = a.EventCreateWithFlags(&w->event, cudaEventDisableTiming);
  if (ce == cudaSuccess) ce = a.EventRecord(w->event, s);
  if (ce != cudaSuccess) {
    if (w->event != nullptr) a.EventDestroy(w->event);
    delete w;
    const std::string why = cuda_text(a, "recording the operation's event", ce);
    in.fail(GANG_ERR_SYSTEM, why);
    say(err, err_len, why);
    return GANG_ERR_SYSTEM;
  }
  {
    std::lock_guard<std::mutex> lock(in.mu);
    in.live.push_back(w);
  }
  *work = w;
  return GANG_OK;
}

gang_status_t test(void* work, char* err, size_t err_len) {
  auto& w = *static_cast<Work*>(work);
  Instance& in = *w.inst;
  std::string text;
  const int done = w.status.load();
  if (done != GANG_IN_PROGRESS) {
    if (done != GANG_OK) {
      in.failed(&text);
      say(err, err_len, text);
    }
    return static_cast<gang_status_t>(done);
  }
  // A failed or aborted instance fails what it has not finished: its
  // event may still complete, with nothing computed.
  if (const int st = in.failed(&text)) {
    w.status.store(st);
    say(err, err_len, text);
    return static_cast<gang_status_t>(st);
  }
  const cudaError_t q = in.api->EventQuery(w.event);
  if (q == cudaSuccess) {
    ncclResult_t async = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(in.comm_mu);
      if (!in.comm_gone) in.api->CommGetAsyncError(in.comm, &async);
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      const std::string why = nccl_text(*in.api, "the communicator failed", async);
      in.fail(status_of(async), why);
      w.status.store(status_of(async));
      say(err, err_len, why);
      return static_cast<gang_status_t>(status_of(async));
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

// Makes the caller's stream wait for the work (the legacy default stream
// when the gang has none of its own), then waits on the host until the
// work ends or until_ns.
gang_status_t wait(void* work, int64_t until_ns, char* err, size_t err_len) {
  auto& w = *static_cast<Work*>(work);
  if (w.own_stream && !w.stream_waited) {
    w.inst->api->StreamWaitEvent(nullptr, w.event, 0);
    w.stream_waited = true;
  }
  for (int64_t pause_us = 20;; pause_us = std::min<int64_t>(pause_us * 2, 1000)) {
    const gang_status_t s = test(work, err, err_len);
    if (s != GANG_IN_PROGRESS || now_ns() >= until_ns) return s;
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}

void work_free(void* work) {
  auto* w = static_cast<Work*>(work);
  {
    std::lock_guard<std::mutex> lock(w->inst->mu);
    auto& v = w->inst->live;
    v.erase(std::remove(v.begin(), v.end(), w), v.end());
  }
  if (w->event != nullptr) w->inst->api->EventDestroy(w->event);
  delete w;
}

gang_status_t poll_error(void* backend, char* err, size_t err_len) {
  std::string text;
  const int st = static_cast<Instance*>(backend)->failed(&text);
  if (st != GANG_OK) say(err, err_len, text);
  return static_cast<gang_status_t>(st);
}

void finalize(void* backend) {
  auto& in = *static_cast<Instance*>(backend);
  std::lock_guard<std::mutex> lock(in.comm_mu);
  if (in.comm_gone || in.comm == nullptr) return;
  if (in.api->CommFinalize(in.comm) == ncclInProgress) {
    settle(in, in.comm, now_ns() + 10 * 1000000000LL);
  }
}

void abort_instance(void* backend) {
  auto& in = *static_cast<Instance*>(backend);
  in.aborted.store(true);
  {
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.error == GANG_OK) {
      in.error = GANG_ERR_ABORTED;
      in.error_text = "the gang was aborted";
    }
  }
  in.abort_comm();
  in.cv.notify_all();
}

const gang_backend_t kTable = {
    sizeof(gang_backend_t),
    GANG_BACKEND_ABI_VERSION,
    1u << GANG_DEVICE_CUDA,
    "nccl",
    10,
    GANG_BACKEND_STREAM_ORDERED,
    probe,
    create,
    destroy,
    supports,
    post,
    test,
    wait,
    work_free,
    poll_error,
    finalize,
    abort_instance,
    split,
};

}  // namespace
}  // namespace gang::backends::nccl_impl

extern "C" GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin(void) {
  return &gang::backends::nccl_impl::kTable;
}
