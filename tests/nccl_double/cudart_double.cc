// cudart_double.cc - a TEST DOUBLE of the CUDA runtime (libcudart.so.13),
// never installed: exactly the functions gang's NCCL backend and its tests
// call, with "device memory" in host memory, each stream an ordered host
// queue run by a thread of its own, and events as marks in those queues.
// See README.md beside it.
//
// GANG_CUDA_DOUBLE_DEVICES: how many devices it reports (default 4; 0 is a
// machine without a GPU).
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

// The opaque types of the real headers, defined by the double.
struct CUstream_st {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> tasks;
  uint64_t queued = 0, done = 0;
  bool stop = false;
  std::thread worker;

  CUstream_st() : worker([this] { run(); }) {}
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
  std::shared_ptr<EventMarks> m = std::make_shared<EventMarks>();
};

namespace {

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;

int device_count() {
  const char* v = std::getenv("GANG_CUDA_DOUBLE_DEVICES");
  return v ? std::atoi(v) : 4;
}

// The legacy default stream (NULL, cudaStreamLegacy, cudaStreamPerThread).
CUstream_st* resolve(cudaStream_t s) {
  static CUstream_st* legacy = new CUstream_st;  // lives as long as the process
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return legacy;
  return s;
}

cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}

std::mutex streams_mu;
std::vector<CUstream_st*>& streams() {
  static auto* v = new std::vector<CUstream_st*>;
  return *v;
}

}  // namespace

extern "C" {

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error (cuda double)";
    case cudaErrorNotReady: return "device not ready (cuda double)";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected (cuda double)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (cuda double)";
    case cudaErrorInvalidValue: return "invalid argument (cuda double)";
    case cudaErrorMemoryAllocation: return "out of memory (cuda double)";
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
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
  *s = new CUstream_st;
  std::lock_guard<std::mutex> lock(streams_mu);
  streams().push_back(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s == nullptr) return fail(cudaErrorInvalidValue);
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
  resolve(s)->drain();
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  return resolve(s)->idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void) {
  resolve(nullptr)->drain();
  std::vector<CUstream_st*> all;
  {
    std::lock_guard<std::mutex> lock(streams_mu);
    all = streams();
  }
  for (auto* s : all) s->drain();
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  *e = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  delete e;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  auto m = e->m;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    n = ++m->recorded;
  }
  resolve(s)->push([m, n] { m->reach(n); });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(e->m->mu);
  return e->m->reached >= e->m->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (e == nullptr) return fail(cudaErrorInvalidValue);
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
  auto m = e->m;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(m->mu);
    n = m->recorded;
  }
  resolve(s)->push([m, n] { m->wait_for(n); });
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* data) {
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  resolve(s)->push([fn, data] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t n) {
  if (p == nullptr) return fail(cudaErrorInvalidValue);
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void* p) {
  std::free(p);
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

}  // extern "C"
