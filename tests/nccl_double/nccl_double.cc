// nccl_double.cc - a TEST DOUBLE of NCCL (libnccl.so.2), never installed:
// exactly the functions gang's NCCL backend calls. A communicator is a CPU
// gang of gang's own (so multi-process tests are real processes exchanging
// real bytes); each operation is a host function queued on the caller's
// stream of the CUDA runtime double (cudaLaunchHostFunc), which runs the
// CPU collective on the "device" buffers (host memory there). See README.md.
//
// GANG_NCCL_DOUBLE_FAULT=KIND:RANK:N injects a fault into the N-th
// operation (1-based, counted per process) of the process whose first
// communicator rank is RANK: KIND "remote_error" makes the communicator's
// asynchronous error ncclRemoteError instead of running it, "hang" blocks
// it until the communicator is aborted, "quiet_error" is "remote_error" on a
// rank whose abort then leaves its CPU gang up, so that the peers hear of
// the failure only through gang's own notice.
#include <cuda_runtime_api.h>
#include <gang/gang.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

struct State {
  gang_t* gang = nullptr;
  int rank = 0, size = 0, device = 0;
  std::atomic<int> async{ncclSuccess};  // ncclResult_t
  std::atomic<bool> aborted{false};
  std::atomic<bool> quiet{false};  // an abort leaves the CPU gang up
  std::string last;
  ~State() {
    if (gang != nullptr) gang_destroy(gang);
  }
};

}  // namespace

struct ncclComm {
  std::shared_ptr<State> s;
  std::thread init;  // a non-blocking creation in progress
};

namespace {

struct Op {
  enum Kind { kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter, kSend, kRecv } kind;
  const void* send;
  void* recv;
  size_t count;
  gang_dtype_t dtype;
  gang_op_t op;
  int root;  // or peer
  std::shared_ptr<State> s;
  cudaStream_t stream;
};

thread_local int group_depth = 0;
thread_local std::vector<Op> grouped;
std::atomic<int> first_rank{-1};
std::atomic<long> ops_so_far{0};

gang_dtype_t dtype_of(ncclDataType_t t, bool* ok) {
  *ok = true;
  switch (t) {
    case ncclInt8: return GANG_INT8;
    case ncclUint8: return GANG_UINT8;
    case ncclInt32: return GANG_INT32;
    case ncclUint32: return GANG_UINT32;
    case ncclInt64: return GANG_INT64;
    case ncclUint64: return GANG_UINT64;
    case ncclFloat16: return GANG_FLOAT16;
    case ncclFloat32: return GANG_FLOAT32;
    case ncclFloat64: return GANG_FLOAT64;
    case ncclBfloat16: return GANG_BFLOAT16;
    default: *ok = false; return GANG_UINT8;
  }
}

gang_op_t op_of(ncclRedOp_t o, bool* ok) {
  *ok = true;
  switch (o) {
    case ncclSum: return GANG_SUM;
    case ncclProd: return GANG_PROD;
    case ncclMax: return GANG_MAX;
    case ncclMin: return GANG_MIN;
    case ncclAvg: return GANG_AVG;
    default: *ok = false; return GANG_SUM;
  }
}

// The fault this process should inject into its n-th operation, or "".
std::string fault_for(long n) {
  const char* v = std::getenv("GANG_NCCL_DOUBLE_FAULT");
  if (v == nullptr) return "";
  char kind[32] = {0};
  int rank = -1;
  long at = -1;
  if (std::sscanf(v, "%31[a-z_]:%d:%ld", kind, &rank, &at) != 3) return "";
  return rank == first_rank.load() && at == n ? kind : "";
}

void fail_state(State& s, ncclResult_t r, const std::string& why) {
  int none = ncclSuccess;
  if (s.async.compare_exchange_strong(none, r)) s.last = why;
}

// Runs ops (one group) on the CPU gang: point-to-point ones together.
void run(const std::vector<Op>& ops) {
  State& s = *ops.front().s;
  if (s.aborted.load() || s.async.load() != ncclSuccess) return;
  const long n = ++ops_so_far;
  const std::string fault = fault_for(n);
  if (fault == "remote_error" || fault == "quiet_error") {
    s.quiet = fault == "quiet_error";
    fail_state(s, ncclRemoteError, "injected remote error (nccl double)");
    return;
  }
  if (fault == "hang") {
    while (!s.aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return;
  }
  bool p2p_open = false;
  gang_status_t st = GANG_OK;
  // Messages to itself, matched in order within the group (a CPU gang has
  // no sends to self).
  std::vector<const Op*> to_self;
  size_t self_taken = 0;
  for (const Op& o : ops) {
    if ((o.kind == Op::kSend || o.kind == Op::kRecv) && o.root == s.rank) {
      if (o.kind == Op::kSend) {
        to_self.push_back(&o);
      } else if (self_taken < to_self.size()) {
        const Op& from = *to_self[self_taken++];
        if (o.count != 0) std::memmove(o.recv, from.send, o.count * gang_dtype_size(o.dtype));
      } else {
        fail_state(s, ncclInvalidUsage, "a receive from itself before the send (nccl double)");
        return;
      }
      continue;
    }
    const bool p2p = o.kind == Op::kSend || o.kind == Op::kRecv;
    if (p2p && !p2p_open) {
      st = gang_group_start(s.gang);
      p2p_open = true;
    } else if (!p2p && p2p_open) {
      st = gang_group_end(s.gang, nullptr);
      p2p_open = false;
    }
    if (st != GANG_OK) break;
    switch (o.kind) {
      case Op::kAllReduce:
        st = gang_all_reduce(s.gang, o.send, o.recv, o.count, o.dtype, o.op, nullptr);
        break;
      case Op::kReduce:
        st = gang_reduce(s.gang, o.send, o.recv, o.count, o.dtype, o.op, o.root, nullptr);
        break;
      case Op::kBroadcast:
        if (s.rank == o.root && o.send != o.recv && o.count != 0) {
          std::memmove(o.recv, o.send, o.count * gang_dtype_size(o.dtype));
        }
        st = gang_broadcast(s.gang, o.recv, o.count, o.dtype, o.root, nullptr);
        break;
      case Op::kAllGather:
        st = gang_all_gather(s.gang, o.send, o.recv, o.count, o.dtype, nullptr);
        break;
      case Op::kReduceScatter:
        st = gang_reduce_scatter(s.gang, o.send, o.recv, o.count, o.dtype, o.op, nullptr);
        break;
      case Op::kSend:
        st = gang_send(s.gang, o.send, o.count, o.dtype, o.root, 0, nullptr);
        break;
      case Op::kRecv:
        st = gang_recv(s.gang, o.recv, o.count, o.dtype, o.root, 0, nullptr);
        break;
    }
    if (st != GANG_OK) break;
  }
  if (st == GANG_OK && p2p_open) st = gang_group_end(s.gang, nullptr);
  if (st != GANG_OK && !s.aborted.load()) {
    fail_state(s, st == GANG_ERR_PEER_LOST ? ncclRemoteError : ncclSystemError,
               std::string("CPU gang: ") + gang_last_error());
  }
}

void run_host(void* p) {
  std::unique_ptr<std::vector<Op>> ops(static_cast<std::vector<Op>*>(p));
  run(*ops);
}

ncclResult_t enqueue(Op op) {
  if (group_depth > 0) {
    grouped.push_back(std::move(op));
    return ncclSuccess;
  }
  auto* ops = new std::vector<Op>{std::move(op)};
  cudaLaunchHostFunc(ops->front().stream, run_host, ops);
  return ncclSuccess;
}

ncclResult_t enqueue_checked(ncclComm_t comm, Op::Kind kind, const void* send, void* recv,
                             size_t count, ncclDataType_t t, ncclRedOp_t o, int root,
                             cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  bool ok_t, ok_o;
  const gang_dtype_t dt = dtype_of(t, &ok_t);
  const gang_op_t op = op_of(o, &ok_o);
  if (!ok_t || !ok_o) return ncclInvalidArgument;
  if (comm->s->aborted.load()) return ncclInvalidUsage;
  return enqueue(Op{kind, send, recv, count, dt, op, root, comm->s, stream});
}

ncclResult_t init(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                  std::shared_ptr<State> parent, int color, int key, bool blocking) {
  auto* comm = new ncclComm;
  comm->s = std::make_shared<State>();
  comm->s->rank = rank;
  comm->s->size = nranks;
  cudaGetDevice(&comm->s->device);
  comm->s->async = ncclInProgress;
  int expected = -1;
  first_rank.compare_exchange_strong(expected, rank);
  auto make = [s = comm->s, id, parent, color, key]() {
    gang_t* g = nullptr;
    gang_status_t st;
    if (parent) {
      st = gang_split(parent->gang, color, key, &g);
    } else {
      gang_store_t* store = nullptr;
      std::string url(id.internal, strnlen(id.internal, sizeof id.internal));
      const size_t space = url.find(' ');
      const std::string name = url.substr(space + 1);
      url = url.substr(0, space);
      st = gang_store_create(url.c_str(), 0, 60000, &store);
      if (st == GANG_OK) {
        gang_options_t o;
        gang_options_init(&o);
        o.rank = s->rank;
        o.size = s->size;
        o.store = store;
        o.name = name.c_str();
        o.backend = "auto";
        st = gang_create(&o, &g);
        // The store must outlive the gang: kept for the process.
      }
    }
    if (st != GANG_OK) {
      s->last = std::string("CPU gang: ") + gang_last_error();
      s->async = ncclSystemError;
      return;
    }
    s->gang = g;
    s->rank = gang_rank(g);
    s->size = gang_size(g);
    s->async = ncclSuccess;  // published last: readers see rank and size
  };
  if (blocking) {
    make();
    *out = comm;
    return comm->s->async == ncclSuccess ? ncclSuccess : ncclSystemError;
  }
  comm->init = std::thread(make);
  *out = comm;
  return ncclInProgress;
}

bool blocking_of(const ncclConfig_t* c) {
  return c == nullptr || c->blocking == NCCL_CONFIG_UNDEF_INT || c->blocking != 0;
}

std::atomic<int> splits_made{0};

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error (nccl double)";
    case ncclSystemError: return "unhandled system error (nccl double)";
    case ncclInvalidArgument: return "invalid argument (nccl double)";
    case ncclInvalidUsage: return "invalid usage (nccl double)";
    case ncclRemoteError: return "remote process exited or there was a network error (nccl double)";
    case ncclInProgress: return "NCCL operation in progress (nccl double)";
    default: return "unknown result (nccl double)";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  static thread_local std::string text;
  text = comm != nullptr ? comm->s->last : "";
  return text.c_str();
}

// The id names a store server of this process and a fresh gang name.
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::mutex mu;
  static gang_store_t* server = nullptr;
  static int next = 0;
  if (id == nullptr) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(mu);
  if (server == nullptr &&
      gang_store_create("tcp://127.0.0.1:0", 1, 60000, &server) != GANG_OK) {
    return ncclSystemError;
  }
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "tcp://127.0.0.1:%d nccl-double-%d-%d-%u",
                gang_store_port(server), static_cast<int>(getpid()), next++,
                static_cast<unsigned>(std::random_device{}()));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  return init(comm, nranks, id, rank, nullptr, 0, 0, blocking_of(config));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

// Not NCCL's: how many ncclCommSplit calls this process made, for the
// tests to tell a native split from the fallback.
int gang_nccl_double_splits(void) { return splits_made.load(); }

#ifndef GANG_NCCL_DOUBLE_NO_SPLIT
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  if (comm == nullptr || newcomm == nullptr) return ncclInvalidArgument;
  ++splits_made;
  if (color == NCCL_SPLIT_NOCOLOR) {
    // Still collective over the parent: take part without joining.
    gang_t* none = nullptr;
    gang_split(comm->s->gang, -1, key, &none);
    *newcomm = nullptr;
    return ncclSuccess;
  }
  ncclUniqueId unused{};
  return init(newcomm, 0, unused, 0, comm->s, color, key, blocking_of(config));
}
#endif

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  if (comm == nullptr || err == nullptr) return ncclInvalidArgument;
  const int a = comm->s->async.load();
  if (a != ncclInProgress && comm->init.joinable()) comm->init.join();
  *err = static_cast<ncclResult_t>(a);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->s->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->s->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = comm->s->device;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->s->aborted = true;
  if (comm->init.joinable()) comm->init.join();
  if (comm->s->quiet) {
    // Keep the CPU gang up (and silent) until the process exits.
    static std::vector<std::shared_ptr<State>> kept;
    kept.push_back(comm->s);
  } else if (comm->s->gang != nullptr) {
    gang_abort(comm->s->gang);
  }
  delete comm;  // queued operations keep the state alive
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return comm == nullptr ? ncclInvalidArgument : ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (comm->init.joinable()) comm->init.join();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return ncclInvalidUsage;
  if (--group_depth > 0 || grouped.empty()) return ncclSuccess;
  auto* ops = new std::vector<Op>(std::move(grouped));
  grouped.clear();
  cudaLaunchHostFunc(ops->front().stream, run_host, ops);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kAllReduce, send, recv, count, t, op, 0, stream);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kReduce, send, recv, count, t, op, root, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kBroadcast, send, recv, count, t, ncclSum, root, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kAllGather, send, recv, count, t, ncclSum, 0, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kReduceScatter, send, recv, count, t, op, 0, stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t t, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked(comm, Op::kSend, send, nullptr, count, t, ncclSum, peer, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue_checked(comm, Op::kRecv, nullptr, recv, count, t, ncclSum, peer, stream);
}

}  // extern "C"
