// cudart_double.cc - a TEST DOUBLE of the CUDA runtime (libcudart.so.13),
// never installed: exactly the functions gang's NCCL backend and its tests
// call, with "device memory" in host memory, each stream an ordered host
// queue run by a thread of its own, and events as marks in those queues.
// See README.md beside it, which lists what the strict mode models.
//
// GANG_CUDA_DOUBLE_DEVICES: how many devices it reports (default 4; 0 is a
// machine without a GPU). GANG_DOUBLE_STRICT=1: the strict mode (delays
// injected into every stream, per-object devices checked, host pointers
// refused as device memory); a breach prints "cuda double (strict): ..." and
// aborts the process. GANG_DOUBLE_SEED seeds its delays.
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "double_checks.h"

namespace {

bool strict_mode() {
  static const bool on = [] {
    const char* v = std::getenv("GANG_DOUBLE_STRICT");
    return v != nullptr && v[0] == '1';
  }();
  return on;
}

// A delay for the next task of a stream in strict mode: 0 to 400 µs, seeded.
std::chrono::microseconds next_delay() {
  static std::mutex mu;
  static std::mt19937 rng([] {
    const char* v = std::getenv("GANG_DOUBLE_SEED");
    return v != nullptr ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 12345u;
  }());
  std::lock_guard<std::mutex> lock(mu);
  return std::chrono::microseconds(rng() % 400);
}

thread_local int current_device = 0;
thread_local bool device_chosen = false;  // this thread called cudaSetDevice
thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

// The opaque types of the real headers, defined by the double.
struct CUstream_st {
  int device = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  uint64_t queued = 0, done = 0;
  bool stop = false;
  // Stream capture: tasks pushed while capturing go to `captured`, those
  // of a stream that joined another's capture (it waited for an event
  // recorded in it) to its origin's, in the order they are pushed, which
  // keeps every order the capture has. A joined stream must be joined back
  // (the origin waits for an event recorded on it after its last task)
  // before the origin's capture ends.
  bool capturing = false;
  bool capture_broken = false;
  std::vector<std::function<void()>> captured;
  CUstream_st* origin = nullptr;       // joined: the capture's first stream
  bool unjoined = false;               // joined: tasks the origin did not wait for
  std::vector<CUstream_st*> joined;    // origin: the streams that joined
  std::thread worker;

  explicit CUstream_st(int dev) : device(dev), worker([this] { run(); }) {}
  ~CUstream_st() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (capturing && origin != nullptr) {
        unjoined = true;
        std::lock_guard<std::mutex> into(origin->mu);
        origin->captured.push_back(std::move(task));
        return;
      }
      if (capturing) {
        captured.push_back(std::move(task));
        return;
      }
      tasks.push_back(std::move(task));
      ++queued;
    }
    cv.notify_all();
  }
  // Waits until everything queued so far has run.
  void drain() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t target = queued;
    cv.wait(lock, [&] { return done >= target; });
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu);
    return done == queued;
  }
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !tasks.empty(); });
        if (tasks.empty()) return;
        task = std::move(tasks.front());
        tasks.pop_front();
      }
      // Strict: work on one stream takes its time, so a stream that does
      // not wait for another reads what that one has not written yet.
      if (strict_mode()) std::this_thread::sleep_for(next_delay());
      task();
      {
        std::lock_guard<std::mutex> lock(mu);
        ++done;
      }
      cv.notify_all();
    }
  }
};

// An event's marks; shared with the queued tasks that reach or wait for
// them, so an event may be destroyed while they are pending, as in CUDA.
struct EventMarks {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;  // records so far
  uint64_t reached = 0;   // records whose mark its stream has run
  void reach(uint64_t n) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (n > reached) reached = n;
    }
    cv.notify_all();
  }
  void wait_for(uint64_t n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return reached >= n; });
  }
};

struct CUevent_st {
  int device = 0;
  // The origin of the capture it was last recorded in (null: outside any),
  // and the stream it was recorded on.
  CUstream_st* capture = nullptr;
  CUstream_st* recorded_on = nullptr;
  bool in_capture() const { return capture != nullptr; }
  std::shared_ptr<EventMarks> m = std::make_shared<EventMarks>();
};

// A captured graph: the tasks, run in order on the launching stream.
struct CUgraph_st {
  std::vector<std::function<void()>> tasks;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> tasks;
};

namespace {

std::atomic<long> events_created{0};

int device_count() {
  const char* v = std::getenv("GANG_CUDA_DOUBLE_DEVICES");
  return v ? std::atoi(v) : 4;
}

// The legacy default stream (NULL, cudaStreamLegacy, cudaStreamPerThread)
// of the thread's current device.
CUstream_st* resolve_legacy(int device) {
  static CUstream_st* legacy[64];  // live as long as the process
  static std::once_flag once;
  std::call_once(once, [] {
    for (int d = 0; d < 64; ++d) legacy[d] = new CUstream_st(d);
  });
  return legacy[device & 63];
}

CUstream_st* resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) {
    return resolve_legacy(current_device);
  }
  return s;
}

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

// Strict: the calling thread must have chosen the object's device.
void check_device(const char* call, int object_device) {
  if (!strict_mode() || current_device == object_device) return;
  gang_double_breach("cuda double", "%s: an object of device %d used from a thread on device %d%s",
                     call, object_device, current_device,
                     device_chosen ? "" : " (it never called cudaSetDevice)");
}

std::mutex streams_mu;
std::vector<CUstream_st*>& streams() {
  static auto* v = new std::vector<CUstream_st*>;
  return *v;
}

// Allocations, for the strict checks of device pointers.
struct Allocation {
  size_t size;
  int device;
};
std::mutex allocs_mu;
std::map<uintptr_t, Allocation>& allocations() {
  static auto* m = new std::map<uintptr_t, Allocation>;
  return *m;
}

bool capturing(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  return s->capturing;
}

// The first stream of the capture s is part of, or null.
CUstream_st* capture_of(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  return !s->capturing ? nullptr : s->origin != nullptr ? s->origin : s;
}

void break_capture(CUstream_st* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->capturing) return;
  if (s->origin == nullptr) {
    s->capture_broken = true;
    return;
  }
  std::lock_guard<std::mutex> origin(s->origin->mu);
  s->origin->capture_broken = true;
}

// Runs what every stream of `device` (-1: of every device) holds so far,
// that device's legacy stream first; streams being captured are left alone.
void drain_streams(int device) {
  if (device >= 0) resolve_legacy(device)->drain();
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lock(streams_mu);
    all = streams();
  }
  for (auto* s : all) {
    if ((device < 0 || s->device == device) && !capturing(s)) s->drain();
  }
}

}  // namespace

// ---- not CUDA's: the double's own, for the NCCL double and the tests ----

extern "C" {

void gang_double_breach(const char* who, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "%s (strict): ", who);
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  std::fflush(stderr);
  std::abort();
}

int gang_double_strict(void) { return strict_mode() ? 1 : 0; }

int gang_cuda_double_current_device(void) { return current_device; }

int gang_cuda_double_stream_device(cudaStream_t s) { return resolve(s)->device; }

int gang_cuda_double_stream_capturing(cudaStream_t s) { return capturing(resolve(s)) ? 1 : 0; }

int gang_cuda_double_pointer_device(const void* p, size_t len) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(allocs_mu);
  auto& m = allocations();
  auto it = m.upper_bound(at);
  if (it == m.begin()) return -1;
  --it;
  if (at + len > it->first + it->second.size) return -1;
  return it->second.device;
}

long gang_cuda_double_events_created(void) { return events_created.load(); }

int gang_cuda_double_fail(int error) { return fail(static_cast<cudaError_t>(error)); }

void gang_cuda_double_device_drain(int device) { drain_streams(device); }

}  // extern "C"

extern "C" {

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (cuda double)";
    case cudaErrorNotReady: return "device not ready (cuda double)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (cuda double)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (cuda double)";
    case cudaErrorInvalidValue: return "invalid argument (cuda double)";
    case cudaErrorMemoryAllocation: return "out of memory (cuda double)";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing (cuda double)";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture (cuda double)";
    case cudaErrorStreamCaptureUnjoined:
      return "capture was not joined back to its origin stream (cuda double)";
    case cudaErrorStreamCaptureIsolation:
      return "an event of another capture (cuda double)";
    case cudaErrorNotSupported:
      return "operation not supported (cuda double: it runs no kernels; move data with copies)";
    default: return "unknown error (cuda double)";
  }
}

const char* cudaGetErrorName(cudaError_t e) { return cudaGetErrorString(e); }

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  current_device = device;
  device_chosen = true;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st(current_device);
  std::lock_guard<std::mutex> lock(streams_mu);
  streams().push_back(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  check_device("cudaStreamDestroy", s->device);
  {
    std::lock_guard<std::mutex> lock(streams_mu);
    auto& v = streams();
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == s) {
        v.erase(v.begin() + static_cast<long>(i));
        break;
      }
    }
  }
  s->drain();
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  CUstream_st* q = resolve(s);
  if (capturing(q)) {
    break_capture(q);
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  q->drain();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  CUstream_st* q = resolve(s);
  if (capturing(q)) {
    break_capture(q);
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  return q->idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void) {
  resolve(nullptr)->drain();
  drain_streams(-1);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st;
  (*e)->device = current_device;
  ++events_created;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  check_device("cudaEventDestroy", e->device);
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* q = resolve(s);
  if (strict_mode() && q->device != e->device) {
    gang_double_breach("cuda double",
                       "cudaEventRecord: an event of device %d recorded on a stream of device %d",
                       e->device, q->device);
  }
  check_device("cudaEventRecord", e->device);
  auto m = e->m;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    n = ++m->recorded;
  }
  e->capture = capture_of(q);
  e->recorded_on = q;
  q->push([m, n] { m->reach(n); });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  check_device("cudaEventQuery", e->device);
  if (e->in_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lock(e->m->mu);
  return e->m->reached >= e->m->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  check_device("cudaEventSynchronize", e->device);
  if (e->in_capture()) return fail(cudaErrorStreamCaptureUnsupported);
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(e->m->mu);
    n = e->m->recorded;
  }
  e->m->wait_for(n);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* q = resolve(s);
  check_device("cudaStreamWaitEvent", q->device);
  if (strict_mode() && q->device != e->device) {
    gang_double_breach("cuda double",
                       "cudaStreamWaitEvent: a stream of device %d waits for an event of device "
                       "%d (the legacy stream of the wrong device?)",
                       q->device, e->device);
  }
  CUstream_st* in = capture_of(q);
  if (in != nullptr && !e->in_capture()) {
    // An event recorded outside the capture cannot order a captured stream.
    break_capture(q);
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (e->in_capture() && in == nullptr) {
    // Waiting for an event recorded in a capture joins it.
    {
      std::lock_guard<std::mutex> lock(q->mu);
      q->capturing = true;
      q->capture_broken = false;
      q->origin = e->capture;
      q->unjoined = false;
    }
    std::lock_guard<std::mutex> lock(e->capture->mu);
    e->capture->joined.push_back(q);
  } else if (e->in_capture() && in != e->capture) {
    break_capture(q);  // an event of another capture
    return fail(cudaErrorStreamCaptureIsolation);
  } else if (e->in_capture() && q == in && e->recorded_on != q) {
    // The origin waits for a joined stream: joined back, so far.
    std::lock_guard<std::mutex> lock(e->recorded_on->mu);
    e->recorded_on->unjoined = false;
  }
  auto m = e->m;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    n = m->recorded;
  }
  q->push([m, n] { m->wait_for(n); });
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  resolve(s)->push([fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t n) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  const size_t size = (n + 255) / 256 * 256 + 256;
  *p = std::aligned_alloc(256, size);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  std::lock_guard<std::mutex> lock(allocs_mu);
  allocations()[reinterpret_cast<uintptr_t>(*p)] = Allocation{size, current_device};
  return cudaSuccess;
}

namespace {
void forget(void* p) {
  std::lock_guard<std::mutex> lock(allocs_mu);
  allocations().erase(reinterpret_cast<uintptr_t>(p));
}
}  // namespace

// CUDA's cudaFree synchronises the device first: it waits for every stream,
// which hangs while a kernel is stuck. The double says so in strict mode by
// waiting for the legacy stream of the current device.
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  resolve(nullptr)->drain();
  forget(p);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
  if (p == nullptr) return cudaSuccess;
  resolve(s)->push([p] {
    forget(p);
    std::free(p);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* to, const void* from, size_t n, cudaMemcpyKind) {
  resolve(nullptr)->drain();
  if (n != 0) std::memmove(to, from, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* to, const void* from, size_t n, cudaMemcpyKind,
                            cudaStream_t s) {
  resolve(s)->push([to, from, n] {
    if (n != 0) std::memmove(to, from, n);
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  resolve(s)->push([p, v, n] { std::memset(p, v, n); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int v, size_t n) {
  resolve(nullptr)->drain();
  std::memset(p, v, n);
  return cudaSuccess;
}

// ---- stream capture: the stream's tasks become a graph, run at launch ----

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
  if (s == nullptr || s == cudaStreamLegacy) return fail(cudaErrorStreamCaptureUnsupported);
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capturing) return fail(cudaErrorInvalidValue);
  s->capturing = true;
  s->capture_broken = false;
  s->captured.clear();
  s->joined.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  if (s == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  std::vector<CUstream_st*> joined;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->capturing || s->origin != nullptr) return fail(cudaErrorInvalidValue);
    joined.swap(s->joined);
  }
  // The streams that joined leave the capture; one not joined back fails it.
  bool unjoined = false;
  for (CUstream_st* j : joined) {
    std::lock_guard<std::mutex> lock(j->mu);
    unjoined = unjoined || j->unjoined;
    j->capturing = false;
    j->origin = nullptr;
    j->unjoined = false;
  }
  std::lock_guard<std::mutex> lock(s->mu);
  s->capturing = false;
  if (s->capture_broken || unjoined) {
    s->captured.clear();
    *graph = nullptr;
    return fail(unjoined ? cudaErrorStreamCaptureUnjoined : cudaErrorStreamCaptureInvalidated);
  }
  *graph = new CUgraph_st{std::move(s->captured)};
  s->captured.clear();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* q = resolve(s);
  CUstream_st* origin = capture_of(q);
  if (origin == nullptr) {
    *status = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> lock(origin->mu);
  *status = origin->capture_broken ? cudaStreamCaptureStatusInvalidated
                                   : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->tasks};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  CUstream_st* q = resolve(s);
  for (const auto& t : exec->tasks) q->push(t);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
