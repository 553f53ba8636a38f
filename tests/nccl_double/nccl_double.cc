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
//
// The strict mode (GANG_DOUBLE_STRICT=1, on in CI) holds the module to the
// rules of the real NCCL where a lenient double would let it through: on a
// non-blocking communicator, collectives and ncclGroupEnd return
// ncclInProgress at random (seeded by GANG_DOUBLE_SEED; or
// GANG_NCCL_DOUBLE_INPROGRESS=always|never|random in any mode) and launch
// from a thread of the communicator's, and any call on the communicator but
// ncclCommGetAsyncError and ncclCommAbort before it settles is a breach;
// ncclCommSplit leaves the child NULL until the parent is polled to the end
// of the split (the no-color case returns ncclInProgress too); two threads
// in calls on one communicator at once is a breach; buffers must be
// cudaMalloc'd memory of the communicator's device, and streams of it;
// ncclCommFinalize stays in progress for 300 ms, ncclCommDestroy of a
// communicator that was not finalized blocks for 3 s (as it waits for its
// peers), ncclCommAbort takes 500 ms. A breach prints
// "nccl double (strict): ..." and aborts the process.
#include <cuda_runtime_api.h>
#include <gang/gang.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "double_checks.h"

namespace {

struct State {
  gang_t* gang = nullptr;
  int rank = 0, size = 0, device = 0;
  std::atomic<int> async{ncclSuccess};  // ncclResult_t
  std::atomic<bool> aborted{false};
  std::atomic<bool> quiet{false};  // an abort leaves the CPU gang up
  std::mutex last_mu;  // guards last: a stream's thread writes it
  std::string last;
  void set_last(const std::string& text) {
    std::lock_guard<std::mutex> lock(last_mu);
    last = text;
  }
  std::string get_last() {
    std::lock_guard<std::mutex> lock(last_mu);
    return last;
  }
  // Where its CPU gang met, for gangs derived by ncclCommShrink: the store
  // and the gang's name, and how many were derived from it so far.
  std::string url, name;
  int derived = 0;
  ~State() {
    if (gang != nullptr) gang_destroy(gang);
  }
};

}  // namespace

struct ncclComm {
  std::shared_ptr<State> s;
  std::thread init;  // a non-blocking creation in progress
  bool blocking = true;
  int device = 0;
  std::atomic<int> in_call{0};  // threads in a call on it (strict: one)
  // A call that returned ncclInProgress and runs on `worker`: until it is
  // done, only ncclCommGetAsyncError and ncclCommAbort may be called.
  std::atomic<bool> pending{false};
  std::mutex job_mu;
  std::condition_variable job_cv;
  std::function<void()> job;
  bool worker_stop = false;
  std::thread worker;
  bool finalized = false;
  std::atomic<bool> launched{false};  // its first operation was launched

  ~ncclComm() {
    if (worker.joinable()) {
      {
        std::lock_guard<std::mutex> lock(job_mu);
        worker_stop = true;
      }
      job_cv.notify_all();
      worker.join();
    }
    if (init.joinable()) init.join();
  }

  // Runs fn on the communicator's thread (as NCCL's launch thread does);
  // the communicator is in progress until it returns.
  void launch(std::function<void()> fn) {
    pending = true;
    {
      std::lock_guard<std::mutex> lock(job_mu);
      job = std::move(fn);
      if (!worker.joinable()) worker = std::thread([this] { work(); });
    }
    job_cv.notify_all();
  }
  void work() {
    cudaSetDevice(device);
    std::unique_lock<std::mutex> lock(job_mu);
    for (;;) {
      job_cv.wait(lock, [&] { return worker_stop || job; });
      if (!job) return;
      auto fn = std::move(job);
      job = nullptr;
      lock.unlock();
      fn();
      pending = false;
      lock.lock();
    }
  }
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
  bool in_group = false;  // issued between ncclGroupStart and ncclGroupEnd
};

thread_local int group_depth = 0;
thread_local std::vector<Op> grouped;
std::atomic<int> first_rank{-1};
std::atomic<long> ops_so_far{0};

bool strict() { return gang_double_strict() != 0; }

// Whether the next collective or group on a non-blocking communicator
// returns ncclInProgress and launches from the communicator's thread.
bool next_in_progress() {
  static const int mode = [] {  // 0 never, 1 always, 2 at random
    const char* v = std::getenv("GANG_NCCL_DOUBLE_INPROGRESS");
    if (v != nullptr) return std::strcmp(v, "always") == 0 ? 1 : std::strcmp(v, "random") == 0 ? 2 : 0;
    return strict() ? 2 : 0;
  }();
  if (mode < 2) return mode == 1;
  static std::mutex mu;
  static std::mt19937 rng([] {
    const char* v = std::getenv("GANG_DOUBLE_SEED");
    return v != nullptr ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) + 7u : 54321u;
  }());
  std::lock_guard<std::mutex> lock(mu);
  return rng() % 2 == 0;
}

// One call on a communicator: strict mode allows one thread at a time, and
// no call but polling and abort while an earlier one is in progress.
class Call {
 public:
  Call(ncclComm_t comm, const char* name, bool while_pending = false) : comm_(comm) {
    if (comm_ == nullptr) return;
    if (comm_->in_call.fetch_add(1) > 0 && strict()) {
      gang_double_breach("nccl double", "%s: another thread is in a call on this communicator", name);
    }
    if (!while_pending && comm_->pending.load() && strict()) {
      gang_double_breach("nccl double",
                         "%s: called while the communicator's last call is in progress "
                         "(poll ncclCommGetAsyncError until it is not)",
                         name);
    }
  }
  ~Call() {
    if (comm_ != nullptr) comm_->in_call.fetch_sub(1);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  ncclComm_t comm_;
};

// Strict: a buffer must be device memory of the communicator's device.
void check_buffer(const char* call, ncclComm_t comm, const void* p, size_t bytes) {
  if (!strict() || p == nullptr || bytes == 0) return;
  const int d = gang_cuda_double_pointer_device(p, bytes);
  if (d < 0) {
    gang_double_breach("nccl double", "%s: %p is not device memory (host memory?)", call, p);
  }
  if (d != comm->device) {
    gang_double_breach("nccl double", "%s: memory of device %d on a communicator of device %d",
                       call, d, comm->device);
  }
}

void check_stream(const char* call, ncclComm_t comm, cudaStream_t stream) {
  if (!strict()) return;
  const int d = gang_cuda_double_stream_device(stream);
  if (d != comm->device) {
    gang_double_breach("nccl double",
                       "%s: a stream of device %d on a communicator of device %d%s", call, d,
                       comm->device,
                       stream == nullptr || stream == cudaStreamLegacy
                           ? " (the legacy stream of the thread's current device)"
                           : "");
  }
}

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

// The CPU gang's tag of the strict mode's rendezvous tokens (data: tag 0).
constexpr int kRendezvousTag = 1;

void fail_state(State& s, ncclResult_t r, const std::string& why) {
  int none = ncclSuccess;
  std::lock_guard<std::mutex> lock(s.last_mu);  // the text with the status
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
  // Strict: a send or receive outside a group meets its peer's matching
  // call before anything moves, as NCCL's waits on the GPU for its peer's:
  // two ranks that both send to each other first deadlock, as on a GPU
  // (a group, ncclGroupStart/End, is how an exchange meets).
  const Op& lone = ops.front();
  if (strict() && !lone.in_group && (lone.kind == Op::kSend || lone.kind == Op::kRecv) &&
      lone.root != s.rank) {
    uint8_t token = 0;
    st = lone.kind == Op::kSend
             ? gang_recv(s.gang, &token, 1, GANG_UINT8, lone.root, kRendezvousTag, nullptr)
             : gang_send(s.gang, &token, 1, GANG_UINT8, lone.root, kRendezvousTag, nullptr);
  }
  // Messages to itself, matched in order within the group (a CPU gang has
  // no sends to self).
  std::vector<const Op*> to_self;
  size_t self_taken = 0;
  for (const Op& o : ops) {
    if (st != GANG_OK) break;
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

// A captured launch runs once per graph launch: its operations stay.
void run_host_kept(void* p) { run(*static_cast<std::vector<Op>*>(p)); }

void launch_host(cudaStream_t stream, std::vector<Op>* ops) {
  if (gang_cuda_double_stream_capturing(stream)) {
    cudaLaunchHostFunc(stream, run_host_kept, ops);
  } else {
    cudaLaunchHostFunc(stream, run_host, ops);
  }
}

// Queues ops on their stream, now or (in progress) from the
// communicator's thread.
ncclResult_t launch(ncclComm_t comm, std::vector<Op> ops) {
  auto* list = new std::vector<Op>(std::move(ops));
  // Strict: a communicator's first launch waits until every stream of its
  // device has run what it holds, as real NCCL's first collective does (it
  // connects the peers and loads its kernels, which synchronises with the
  // device): a stream held by a host function holds that first call.
  auto first = [comm] {
    if (strict() && !comm->launched.exchange(true)) gang_cuda_double_device_drain(comm->device);
  };
  if (!comm->blocking && next_in_progress()) {
    comm->launch([list, first] {
      first();
      launch_host(list->front().stream, list);
    });
    return ncclInProgress;
  }
  first();
  launch_host(list->front().stream, list);
  return ncclSuccess;
}

thread_local ncclComm_t group_comm = nullptr;  // the (last) communicator of the group

ncclResult_t enqueue(ncclComm_t comm, Op op) {
  if (group_depth > 0) {
    op.in_group = true;
    grouped.push_back(std::move(op));
    group_comm = comm;
    return ncclSuccess;
  }
  return launch(comm, {std::move(op)});
}

ncclResult_t enqueue_checked(const char* call, ncclComm_t comm, Op::Kind kind, const void* send,
                             void* recv, size_t count, ncclDataType_t t, ncclRedOp_t o, int root,
                             cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  Call guard(comm, call);
  bool ok_t, ok_o;
  const gang_dtype_t dt = dtype_of(t, &ok_t);
  const gang_op_t op = op_of(o, &ok_o);
  if (!ok_t || !ok_o) return ncclInvalidArgument;
  if (comm->s->aborted.load()) return ncclInvalidUsage;
  check_stream(call, comm, stream);
  const size_t es = gang_dtype_size(dt);
  const size_t n = comm->s->size > 0 ? static_cast<size_t>(comm->s->size) : 1;
  // How much of each buffer the call reads and writes.
  size_t in = count * es, out = count * es;
  if (kind == Op::kAllGather) out *= n;
  if (kind == Op::kReduceScatter) in *= n;
  if (kind == Op::kReduce && comm->s->rank != root) out = 0;
  check_buffer(call, comm, send, kind == Op::kRecv ? 0 : in);
  check_buffer(call, comm, recv, kind == Op::kSend ? 0 : out);
  return enqueue(comm, Op{kind, send, recv, count, dt, op, root, comm->s, stream});
}

// Makes the CPU gang of a new communicator: from the unique id, or a split
// of the parent's. Sets s->async last (readers then see rank and size).
void make_gang(const std::shared_ptr<State>& s, ncclUniqueId id, std::shared_ptr<State> parent,
               int color, int key, const std::string& child_name = "") {
  gang_t* g = nullptr;
  gang_status_t st;
  if (parent) {
    s->url = parent->url;
    s->name = child_name;
    st = gang_split(parent->gang, color, key, &g);
  } else {
    gang_store_t* store = nullptr;
    std::string url(id.internal, strnlen(id.internal, sizeof id.internal));
    const size_t space = url.find(' ');
    const std::string name = url.substr(space + 1);
    url = url.substr(0, space);
    s->url = url;
    s->name = name;
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
    s->set_last(std::string("CPU gang: ") + gang_last_error());
    s->async = ncclSystemError;
    return;
  }
  s->gang = g;
  s->rank = gang_rank(g);
  s->size = gang_size(g);
  s->async = ncclSuccess;
}

ncclComm_t new_comm(int rank, int nranks, int device, bool blocking) {
  auto* comm = new ncclComm;
  comm->s = std::make_shared<State>();
  comm->s->rank = rank;
  comm->s->size = nranks;
  comm->s->device = device;
  comm->device = device;
  comm->blocking = blocking;
  comm->s->async = ncclInProgress;
  return comm;
}

ncclResult_t init(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                  std::shared_ptr<State> parent, int color, int key, bool blocking,
                  const std::string& child_name = "") {
  int device = 0;
  cudaGetDevice(&device);
  auto* comm = new_comm(rank, nranks, device, blocking);
  int expected = -1;
  first_rank.compare_exchange_strong(expected, rank);
  auto make = [s = comm->s, id, parent, color, key, child_name]() {
    make_gang(s, id, parent, color, key, child_name);
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
std::atomic<int> shrinks_made{0};

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
  text = comm != nullptr ? comm->s->get_last() : "";
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
  Call guard(comm, "ncclCommSplit");
  ++splits_made;
  const bool child_blocking = blocking_of(config);
  const std::string child_name =
      comm->s->name + "/split" + std::to_string(++comm->s->derived) + "." + std::to_string(color);
  if (strict() && !comm->blocking) {
    // As NCCL: the split is a job of the parent's; the child's handle is
    // written when it ends, which the caller learns by polling the parent.
    *newcomm = nullptr;
    std::shared_ptr<State> parent = comm->s;
    const int device = comm->device;
    comm->launch([parent, color, key, newcomm, device, child_blocking, child_name] {
      if (color == NCCL_SPLIT_NOCOLOR) {
        gang_t* none = nullptr;
        gang_split(parent->gang, -1, key, &none);
        return;
      }
      ncclComm_t child = new_comm(0, 0, device, child_blocking);
      make_gang(child->s, ncclUniqueId{}, parent, color, key, child_name);
      *newcomm = child;
    });
    return ncclInProgress;
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    // Still collective over the parent: take part without joining.
    gang_t* none = nullptr;
    gang_split(comm->s->gang, -1, key, &none);
    *newcomm = nullptr;
    return ncclSuccess;
  }
  ncclUniqueId unused{};
  return init(newcomm, 0, unused, 0, comm->s, color, key, child_blocking, child_name);
}

// The survivors meet in a new CPU gang through the root's store (so the
// process that served it, the root communicator's rank 0, must be alive).
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excluded, int count, ncclComm_t* newcomm,
                            ncclConfig_t* config, int) {
  if (comm == nullptr || newcomm == nullptr || count < 0 || (count > 0 && excluded == nullptr)) {
    return ncclInvalidArgument;
  }
  Call guard(comm, "ncclCommShrink");
  ++shrinks_made;
  const int old = comm->s->rank;
  int below = 0;
  for (int i = 0; i < count; ++i) {
    if (excluded[i] == old || excluded[i] < 0 || excluded[i] >= comm->s->size) {
      return ncclInvalidArgument;
    }
    below += excluded[i] < old;
  }
  const int rank = old - below, size = comm->s->size - count;
  const std::string text =
      comm->s->url + " " + comm->s->name + "/shrink" + std::to_string(++comm->s->derived);
  ncclUniqueId id{};
  std::snprintf(id.internal, sizeof id.internal, "%s", text.c_str());
  const bool child_blocking = blocking_of(config);
  if (strict() && !comm->blocking) {
    const int device = comm->device;
    comm->launch([id, rank, size, newcomm, device, child_blocking] {
      ncclComm_t child = new_comm(rank, size, device, child_blocking);
      make_gang(child->s, id, nullptr, 0, 0);
      *newcomm = child;
    });
    return ncclInProgress;
  }
  return init(newcomm, size, id, rank, nullptr, 0, 0, child_blocking);
}
#endif

// Not NCCL's: how many ncclCommShrink calls this process made.
int gang_nccl_double_shrinks(void) { return shrinks_made.load(); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  if (comm == nullptr || err == nullptr) return ncclInvalidArgument;
  Call guard(comm, "ncclCommGetAsyncError", /*while_pending=*/true);
  if (comm->pending.load()) {
    *err = ncclInProgress;
    return ncclSuccess;
  }
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
  {
    Call guard(comm, "ncclCommAbort", /*while_pending=*/true);
    comm->s->aborted = true;
    // NCCL's abort tears down its proxy and network threads: it takes time.
    if (strict()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (comm->init.joinable()) comm->init.join();
    if (comm->s->quiet) {
      // Keep the CPU gang up (and silent) until the process exits.
      static std::vector<std::shared_ptr<State>> kept;
      kept.push_back(comm->s);
    } else if (comm->s->gang != nullptr) {
      gang_abort(comm->s->gang);
    }
  }
  delete comm;  // queued operations keep the state alive
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  Call guard(comm, "ncclCommFinalize");
  comm->finalized = true;
  if (strict() && !comm->blocking) {
    // Flushing what the communicator owes its peers takes a while.
    comm->launch([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    Call guard(comm, "ncclCommDestroy");
    // Destroying a communicator that was not finalized finalizes it first,
    // which waits for its peers.
    if (strict() && !comm->finalized) std::this_thread::sleep_for(std::chrono::seconds(3));
    if (comm->init.joinable()) comm->init.join();
  }
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
  std::vector<Op> ops(std::move(grouped));
  grouped.clear();
  ncclComm_t comm = group_comm;
  group_comm = nullptr;
  Call guard(comm, "ncclGroupEnd");
  return launch(comm, std::move(ops));
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclAllReduce", comm, Op::kAllReduce, send, recv, count, t, op, 0, stream);
}

ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclReduce", comm, Op::kReduce, send, recv, count, t, op, root, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t t,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclBroadcast", comm, Op::kBroadcast, send, recv, count, t, ncclSum, root, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclAllGather", comm, Op::kAllGather, send, recv, count, t, ncclSum, 0, stream);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclReduceScatter", comm, Op::kReduceScatter, send, recv, count, t, op, 0, stream);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t t, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return enqueue_checked("ncclSend", comm, Op::kSend, send, nullptr, count, t, ncclSum, peer, stream);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return enqueue_checked("ncclRecv", comm, Op::kRecv, nullptr, recv, count, t, ncclSum, peer, stream);
}

}  // extern "C"
