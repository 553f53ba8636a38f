// The communicator's life: create (a non-blocking ncclCommInitRankConfig
// whose unique id travels through the gang's store), split (ncclCommSplit
// polled on the parent, as NCCL requires), the watchdog, finalize, abort
// and destroy. See nccl_instance.h for the rules every path keeps.
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "backends/nccl/nccl_instance.h"

namespace gang::backends::nccl_impl {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void say(char* err, size_t len, const std::string& text) {
  if (err != nullptr && len > 0) std::snprintf(err, len, "%s", text.c_str());
}

const char kLate[] = "an operation enqueued on the GPU did not finish before its deadline";

gang_status_t status_of(ncclResult_t r) {
  return r == ncclRemoteError ? GANG_ERR_PEER_LOST : GANG_ERR_SYSTEM;
}

DeviceGuard::DeviceGuard(const Api& api, int device) : api_(api) {
  int current = -1;
  if (api_.GetDevice(&current) != cudaSuccess) current = -1;
  if (current == device) return;
  status_ = api_.SetDevice(device);
  if (status_ == cudaSuccess) previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) api_.SetDevice(previous_);
}

namespace {

// How long destroy waits for an abort NCCL is still running.
constexpr int64_t kAbortGraceMs = 10000;

}  // namespace

void Instance::fail(gang_status_t status, const std::string& text) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (error != GANG_OK) return;
    error = status;
    error_text = text;
  }
  begin_abort();
  cv.notify_all();
}

void Instance::begin_abort() {
  if (aborted.exchange(true)) return;
  std::lock_guard<std::mutex> lock(mu);
  aborter = std::thread([this] {
    {
      DeviceGuard guard(*api, device);
      std::lock_guard<std::mutex> comm_lock(comm_mu);
      if (!comm_gone && comm != nullptr) {
        api->CommAbort(comm);
        comm_gone = true;
      }
    }
    std::lock_guard<std::mutex> state(mu);
    abort_done = true;
    cv.notify_all();
  });
}

gang_status_t Instance::failed(std::string* text) {
  std::lock_guard<std::mutex> lock(mu);
  if (text != nullptr) *text = error_text;
  return error;
}

gang_status_t Instance::abort_cause(std::string* text) {
  const gang_status_t st = failed(text);
  if (st != GANG_OK) return st;
  *text = "the gang was aborted";
  return GANG_ERR_ABORTED;
}

std::string Instance::comm_text(const char* what, ncclResult_t r) {
  std::lock_guard<std::mutex> lock(comm_mu);
  return nccl_text(*api, what, r, comm_gone ? nullptr : comm);
}

// A launch thread's job takes a few microseconds: spun for first, then
// yielded for (never slept: the caller's thread is what waits for it).
constexpr int64_t kSpinNs = 50000;

ncclResult_t Instance::poll(ncclComm_t c, int64_t deadline_ns) {
  const int64_t start = now_ns();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(comm_mu);
      if (comm_gone && c == comm) return ncclInProgress;  // aborted under us
      const ncclResult_t r = api->CommGetAsyncError(c, &state);
      if (r != ncclSuccess) return r;
    }
    if (state != ncclInProgress) return state;
    const int64_t now = now_ns();
    if (aborted.load() || now >= deadline_ns) return ncclInProgress;
    if (now - start >= kSpinNs) ::sched_yield();
  }
}

// The watchdog: every 5 ms the communicator's asynchronous error and the
// deadlines of works still on the GPU (released ones included: a blocking
// call in stream completion returns before its work ends).
void Instance::watch() {
  DeviceGuard guard(*api, device);  // this thread only ever uses this device
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5), [&] { return stop; });
      if (stop) return;
      if (error != GANG_OK) continue;
    }
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(comm_mu);
      if (comm_gone) continue;
      r = api->CommGetAsyncError(comm, &async);
    }
    if (r != ncclSuccess) {
      fail(status_of(r), comm_text("polling the communicator", r));
      continue;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(status_of(async), comm_text("the communicator failed", async));
      continue;
    }
    const int64_t now = now_ns();
    bool late = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (Work* w : live) {
        if (now < w->deadline_ns || w->status.load() != GANG_IN_PROGRESS) continue;
        if (api->EventQuery(w->done) == cudaErrorNotReady) late = true;
      }
    }
    if (late) fail(GANG_ERR_TIMEOUT, kLate);
  }
}

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

namespace {

// The part of an instance that create and split share: a stream of its own
// and the barrier's scratch int, on the device. Null with *status and *why
// set.
Instance* prepare(const Api* api, const gang_backend_config_t* c, int device, gang_status_t* status,
                  std::string* why) {
  auto* in = new Instance;
  in->api = api;
  in->rank = c->rank;
  in->size = c->size;
  in->name = c->gang_name;
  in->device = device;
  in->timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : 600000;
  auto fail = [&](gang_status_t st, const std::string& text) -> Instance* {
    *status = st;
    *why = text;
    destroy(in);
    return nullptr;
  };
  DeviceGuard guard(*api, device);
  if (guard.status() != cudaSuccess) {
    return fail(GANG_ERR_UNAVAILABLE, cuda_text(*api, "cudaSetDevice", guard.status()));
  }
  cudaError_t ce = api->StreamCreateWithFlags(&in->own, cudaStreamNonBlocking);
  if (ce != cudaSuccess) return fail(GANG_ERR_SYSTEM, cuda_text(*api, "cudaStreamCreate", ce));
  ce = api->Malloc(reinterpret_cast<void**>(&in->scratch), sizeof(int));
  if (ce != cudaSuccess) return fail(GANG_ERR_NO_MEMORY, cuda_text(*api, "cudaMalloc", ce));
  return in;
}

// Real NCCL's first collective on a communicator synchronises with the
// whole device (it connects the peers and loads its kernels): behind a
// stream that a host function or long device work holds, a caller's first
// call waited for that stream (206 ms behind a 200 ms host function on an
// H100, in stream completion too), and a program that lets the stream go
// only once the call returns deadlocked. So the communicator's first
// collective is the module's own, while the gang is made: a barrier's
// all-reduce of the scratch int on the instance's stream, waited for until
// the deadline. GANG_OK, or the error with *why.
gang_status_t warm_up(Instance& in, int64_t deadline_ns, std::string* why) {
  const Api& api = *in.api;
  DeviceGuard guard(api, in.device);
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(in.comm_mu);
    r = api.AllReduce(in.scratch, in.scratch, 1, ncclInt32, ncclSum, in.comm, in.own);
  }
  if (r == ncclInProgress) r = in.poll(in.comm, deadline_ns);
  if (r != ncclSuccess) {
    *why = r == ncclInProgress ? std::string("the first collective was not enqueued in time")
                               : in.comm_text("the first collective", r);
    return r == ncclInProgress ? GANG_ERR_TIMEOUT : status_of(r);
  }
  for (;;) {
    const cudaError_t q = api.StreamQuery(in.own);
    if (q == cudaSuccess) return GANG_OK;
    if (q != cudaErrorNotReady) {
      *why = cuda_text(api, "the first collective", q);
      return GANG_ERR_SYSTEM;
    }
    if (in.aborted.load()) {
      std::string cause;
      const gang_status_t st = in.abort_cause(&cause);
      *why = "the first collective was cut short: " + cause;
      return st;
    }
    if (now_ns() >= deadline_ns) {
      *why = "the first collective did not end before the timeout (" +
             std::to_string(in.timeout_ms) + " ms)";
      return GANG_ERR_TIMEOUT;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Waits for the new communicator of a non-blocking init or split (r is
// what the call, or the split's poll of the parent, returned), runs its
// first collective, then starts the watchdog. GANG_OK, or the error with
// the instance destroyed.
gang_status_t commit(Instance* in, ncclResult_t r, const char* call, int64_t deadline_ns,
                     char* err, size_t err_len) {
  const Api& api = *in->api;
  if (r == ncclSuccess || r == ncclInProgress) r = in->poll(in->comm, deadline_ns);
  if (r != ncclSuccess) {
    say(err, err_len,
        r == ncclInProgress ? "the communicator was not ready before the timeout (" +
                                  std::to_string(in->timeout_ms) + " ms)"
                            : nccl_text(api, call, r, in->comm));
    destroy(in);  // aborts the communicator: it never finished
    return r == ncclInProgress ? GANG_ERR_TIMEOUT : status_of(r);
  }
  std::string why;
  const gang_status_t st = warm_up(*in, deadline_ns, &why);
  if (st != GANG_OK) {
    say(err, err_len, why);
    destroy(in);
    return st;
  }
  in->watchdog = std::thread([in] { in->watch(); });
  return GANG_OK;
}

// Non-blocking by default, so that creation, splits and finalize are
// bounded by the gang's timeout and can be aborted. GANG_NCCL_BLOCKING=1
// asks for blocking communicators, as torch.distributed makes by default:
// every collective then launches on the caller's thread (since NCCL 2.23 a
// non-blocking one goes through a launch thread of NCCL's and says
// ncclInProgress), but a rank that never joins holds the others' creation
// forever.
ncclConfig_t comm_config() {
  static const bool blocking = [] {
    const char* v = std::getenv("GANG_NCCL_BLOCKING");
    return v != nullptr && v[0] == '1';
  }();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = blocking ? 1 : 0;
  return config;
}

}  // namespace

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
  const int64_t deadline = now_ns() + (c->timeout_ms > 0 ? c->timeout_ms : 600000) * 1000000;
  gang_status_t status = GANG_OK;
  Instance* in = prepare(api, c, device, &status, &why);
  if (in == nullptr) {
    say(err, err_len, why);
    return status;
  }
  auto fail = [&](gang_status_t st, const std::string& text) {
    say(err, err_len, text);
    destroy(in);
    return st;
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
  ncclConfig_t config = comm_config();
  ncclResult_t r;
  {
    DeviceGuard guard(*api, device);
    r = api->CommInitRankConfig(&in->comm, c->size, id, c->rank, &config);
  }
  if (r != ncclSuccess && r != ncclInProgress) {
    return fail(status_of(r), nccl_text(*api, "ncclCommInitRankConfig", r, in->comm));
  }
  const gang_status_t st = commit(in, r, "ncclCommInitRankConfig", deadline, err, err_len);
  if (st == GANG_OK) *out = in;
  return st;
}

namespace {

// A communicator made from a parent's by one call of NCCL's (ncclCommSplit,
// ncclCommShrink), as NCCL requires on a non-blocking parent: the call, under
// the parent's lock; the parent polled, under its lock, until the job is no
// longer in progress; only then the child's handle, which NCCL writes from
// its own thread when the job ends, read (bounded) and the child polled
// until it is ready. `call` makes the call: it gets the parent's
// communicator and where to write the child. `in` is the new gang's
// instance, or null on a rank that stays out.
template <typename Call>
gang_status_t derive(Instance& p, Instance* in, const char* what, int64_t deadline, Call call,
                     void** out, char* err, size_t err_len) {
  const Api* api = p.api;
  ncclComm_t child = nullptr;
  ncclResult_t r;
  {
    DeviceGuard guard(*api, p.device);
    std::lock_guard<std::mutex> lock(p.comm_mu);
    r = p.comm_gone ? ncclInvalidUsage : call(p.comm, &child);
  }
  if (r == ncclInProgress) {
    DeviceGuard guard(*api, p.device);
    r = p.poll(p.comm, deadline);
  }
  if (r != ncclSuccess) {
    std::string cause;
    const bool aborted = r == ncclInProgress && p.aborted.load();
    const gang_status_t st = aborted ? p.abort_cause(&cause)
                             : r == ncclInProgress ? GANG_ERR_TIMEOUT
                                                   : status_of(r);
    const std::string why = aborted ? std::string(what) + " was cut short: " + cause
                            : r == ncclInProgress ? std::string(what) + " did not finish in time"
                                                  : p.comm_text(what, r);
    say(err, err_len, why);
    // The child, if NCCL made one, is written by the job: it cannot be told
    // apart from a half-made one, so it is left to the parent's abort.
    if (in != nullptr) destroy(in);
    p.fail(st, std::string(what) + " failed: " + why);
    return st;
  }
  if (in == nullptr) return GANG_OK;  // stayed out
  ncclComm_t made = nullptr;
  while ((made = __atomic_load_n(&child, __ATOMIC_ACQUIRE)) == nullptr) {
    if (now_ns() >= deadline) {
      say(err, err_len, std::string(what) + " ended without a communicator before the timeout");
      destroy(in);
      return GANG_ERR_TIMEOUT;
    }
    ::sched_yield();
  }
  in->comm = made;
  const gang_status_t st = commit(in, ncclInProgress, what, deadline, err, err_len);
  if (st == GANG_OK) *out = in;
  return st;
}

}  // namespace

// ncclCommSplit, on every rank of the parent (NCCL_SPLIT_NOCOLOR for a rank
// that stays out).
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
    std::string cause;
    const gang_status_t st = p.abort_cause(&cause);
    say(err, err_len, "the parent gang failed: " + cause);
    return st;
  }
  const int64_t deadline = now_ns() + (c->timeout_ms > 0 ? c->timeout_ms : p.timeout_ms) * 1000000;
  Instance* in = nullptr;
  if (c->color >= 0) {
    gang_status_t status = GANG_OK;
    std::string why;
    in = prepare(api, c, p.device, &status, &why);
    if (in == nullptr) {
      say(err, err_len, why);
      return status;
    }
  }
  ncclConfig_t config = comm_config();
  const int color = c->color >= 0 ? c->color : NCCL_SPLIT_NOCOLOR;
  return derive(
      p, in, "ncclCommSplit", deadline,
      [&](ncclComm_t comm, ncclComm_t* child) {
        return api->CommSplit(comm, color, c->key, child, &config);
      },
      out, err, err_len);
}

// The survivors of a healthy parent shrink it with ncclCommShrink (NCCL
// 2.27+). A parent that failed or was aborted has no communicator left to
// shrink (the module aborts it on any error), and an NCCL without
// ncclCommShrink has none to call: then the survivors make a new
// communicator through the store, as create does. Every survivor takes the
// same way: the core shrinks a gang only after every survivor has failed it
// (a lost rank), or on a healthy one (a rank set aside).
gang_status_t shrink(void* parent, const int32_t* excluded, size_t nexcluded,
                     const gang_backend_config_t* c, void** out, char* err, size_t err_len) {
  auto& p = *static_cast<Instance*>(parent);
  const Api* api = p.api;
  bool usable;
  {
    std::lock_guard<std::mutex> lock(p.comm_mu);
    usable = !p.comm_gone && p.comm != nullptr && !p.aborted.load();
  }
  if (api->CommShrink == nullptr || !usable) return create(c, out, err, err_len);
  const int64_t deadline = now_ns() + (c->timeout_ms > 0 ? c->timeout_ms : p.timeout_ms) * 1000000;
  gang_status_t status = GANG_OK;
  std::string why;
  Instance* in = prepare(api, c, p.device, &status, &why);
  if (in == nullptr) {
    say(err, err_len, why);
    return status;
  }
  std::vector<int> ranks(excluded, excluded + nexcluded);
  ncclConfig_t config = comm_config();
  return derive(
      p, in, "ncclCommShrink", deadline,
      [&](ncclComm_t comm, ncclComm_t* child) {
        return api->CommShrink(comm, ranks.data(), static_cast<int>(ranks.size()), child, &config,
                               NCCL_SHRINK_DEFAULT);
      },
      out, err, err_len);
}

void finalize(void* backend) {
  auto& in = *static_cast<Instance*>(backend);
  DeviceGuard guard(*in.api, in.device);
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(in.comm_mu);
    if (in.comm_gone || in.comm == nullptr) return;
    r = in.api->CommFinalize(in.comm);
  }
  // Polled up to the gang's timeout: what the communicator owes its peers
  // may take a while to flush.
  if (r == ncclInProgress) r = in.poll(in.comm, now_ns() + in.timeout_ms * 1000000);
  std::lock_guard<std::mutex> lock(in.comm_mu);
  in.finalized = r == ncclSuccess;
}

void abort_instance(void* backend) {
  static_cast<Instance*>(backend)->fail(GANG_ERR_ABORTED, "the gang was aborted");
}

gang_status_t poll_error(void* backend, char* err, size_t err_len) {
  std::string text;
  const gang_status_t st = static_cast<Instance*>(backend)->failed(&text);
  if (st != GANG_OK) say(err, err_len, text);
  return st;
}

int32_t device_of(void* backend) { return static_cast<Instance*>(backend)->device; }

// Local, never waits for peers: a communicator that was finalized is
// destroyed, any other aborted (ncclCommDestroy of an unfinalized one would
// wait for them). No device-wide synchronisation: the scratch int is freed
// in stream order.
void destroy(void* backend) {
  auto* in = static_cast<Instance*>(backend);
  if (in == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(in->mu);
    in->stop = true;
  }
  in->cv.notify_all();
  if (in->watchdog.joinable()) in->watchdog.join();
  bool finalized;
  {
    std::lock_guard<std::mutex> lock(in->comm_mu);
    finalized = in->finalized && !in->comm_gone && in->comm != nullptr;
  }
  if (finalized) {
    DeviceGuard guard(*in->api, in->device);
    std::lock_guard<std::mutex> lock(in->comm_mu);
    in->api->CommDestroy(in->comm);
    in->comm_gone = true;
  } else if (in->comm != nullptr) {
    in->begin_abort();
  }
  {
    std::unique_lock<std::mutex> lock(in->mu);
    const bool started = in->aborter.joinable();
    if (started && !in->cv.wait_for(lock, std::chrono::milliseconds(kAbortGraceMs),
                                    [&] { return in->abort_done; })) {
      // NCCL's abort is stuck: leave the instance to it rather than hang.
      std::fprintf(stderr, "gang: nccl: gang \"%s\": ncclCommAbort did not return in %lld ms; "
                   "leaving it running\n", in->name.c_str(), static_cast<long long>(kAbortGraceMs));
      in->aborter.detach();
      return;
    }
  }
  if (in->aborter.joinable()) in->aborter.join();
  DeviceGuard guard(*in->api, in->device);
  free_pool(*in);
  if (in->scratch != nullptr) {
    if (in->api->FreeAsync != nullptr && in->own != nullptr) {
      in->api->FreeAsync(in->scratch, in->own);
    } else {
      in->api->Free(in->scratch);
    }
  }
  if (in->own != nullptr) in->api->StreamDestroy(in->own);
  delete in;
}

}  // namespace gang::backends::nccl_impl
