// cudart_torch.cc - the part of the CUDA runtime double (cudart_double.cc)
// that PyTorch's CUDA build needs to load and run on it, so that
// gang_torch's CUDA path is tested without a GPU: device properties,
// stream priorities, pinned host memory, pointer attributes, capture
// queries and stream callbacks. Kernels do not run here: a launch fails
// with cudaErrorNotSupported, so a test on the double moves tensors with
// copies (torch's H2D, D2H and D2D copies are cudaMemcpyAsync) and gang's
// collectives, never computes on them. What torch links but never calls
// on that path is in cudart_stubs.c.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "double_checks.h"

extern "C" {

cudaError_t cudaDriverGetVersion(int* v) {
  if (v == nullptr) return cudaErrorInvalidValue;
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* v) {
  if (v == nullptr) return cudaErrorInvalidValue;
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }

// A device of 16 GiB with the limits of a recent data-centre GPU, named as
// the double.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  int count = 0;
  if (p == nullptr) return cudaErrorInvalidValue;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    return cudaErrorInvalidDevice;
  }
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "gang cuda double %d", device);
  p->totalGlobalMem = size_t{16} << 30;
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;
  p->sharedMemPerMultiprocessor = 228 << 10;
  p->regsPerBlock = 65536;
  p->regsPerMultiprocessor = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 0x7fffffff;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->multiProcessorCount = 8;
  p->major = 9;
  p->minor = 0;
  p->l2CacheSize = 50 << 20;
  p->memoryBusWidth = 5120;
  p->pciBusID = device + 1;
  p->concurrentKernels = 1;
  p->unifiedAddressing = 1;
  p->asyncEngineCount = 2;
  p->integrated = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (value == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = static_cast<int>(p.sharedMemPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(p.sharedMemPerBlockOptin);
      break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  if (free_bytes != nullptr) *free_bytes = size_t{15} << 30;
  if (total != nullptr) *total = size_t{16} << 30;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) {
  if (can == nullptr) return cudaErrorInvalidValue;
  *can = 0;
  return cudaSuccess;
}

// Priorities are accepted and reported; every stream runs alike.
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int) {
  return cudaStreamCreateWithFlags(s, flags);
}

cudaError_t cudaStreamGetPriority(cudaStream_t, int* priority) {
  if (priority == nullptr) return cudaErrorInvalidValue;
  *priority = 0;
  return cudaSuccess;
}

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph,
                                     const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                     size_t* ndeps) {
  if (status == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = cudaStreamIsCapturing(s, status);
  if (id != nullptr) *id = 0;
  if (graph != nullptr) *graph = nullptr;
  if (deps != nullptr) *deps = nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (ndeps != nullptr) *ndeps = 0;
  return e;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode*) { return cudaSuccess; }

cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int) {
  return cudaEventRecord(e, s);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  if (ms == nullptr) return cudaErrorInvalidValue;
  *ms = 0.0f;
  return cudaSuccess;
}

namespace {

struct Callback {
  cudaStream_t stream;
  cudaStreamCallback_t fn;
  void* data;
};

void run_callback(void* p) {
  auto* c = static_cast<Callback*>(p);
  c->fn(c->stream, cudaSuccess, c->data);
  delete c;
}

// Pinned host memory: ordinary memory, remembered so that pointer
// attributes can tell it from device memory.
std::mutex pinned_mu;
std::set<void*>& pinned() {
  static auto* s = new std::set<void*>;
  return *s;
}

}  // namespace

cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t fn, void* data,
                                  unsigned int) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  return cudaLaunchHostFunc(s, run_callback, new Callback{s, fn, data});
}

cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) {
  if (p == nullptr) return cudaErrorInvalidValue;
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  if (*p == nullptr) return cudaErrorMemoryAllocation;
  std::lock_guard<std::mutex> lock(pinned_mu);
  pinned().insert(*p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t n) { return cudaHostAlloc(p, n, 0); }

cudaError_t cudaFreeHost(void* p) {
  {
    std::lock_guard<std::mutex> lock(pinned_mu);
    pinned().erase(p);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaHostRegister(void*, size_t, unsigned int) { return cudaSuccess; }
cudaError_t cudaHostUnregister(void*) { return cudaSuccess; }

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* ptr) {
  if (a == nullptr) return cudaErrorInvalidValue;
  std::memset(a, 0, sizeof *a);
  const int device = gang_cuda_double_pointer_device(ptr, 1);
  if (device >= 0) {
    a->type = cudaMemoryTypeDevice;
    a->device = device;
    a->devicePointer = const_cast<void*>(ptr);
    return cudaSuccess;
  }
  std::lock_guard<std::mutex> lock(pinned_mu);
  const bool host = pinned().count(const_cast<void*>(ptr)) != 0;
  a->type = host ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
  a->device = host ? 0 : -2;
  a->hostPointer = const_cast<void*>(ptr);
  return cudaSuccess;
}

// The driver's functions torch looks up (its DriverAPI): none, as a driver
// without them answers; torch then goes without.
cudaError_t cudaGetDriverEntryPointByVersion(const char*, void** fn, unsigned int,
                                             unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  if (fn != nullptr) *fn = nullptr;
  if (status != nullptr) *status = cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaMemcpy2DAsync(void* to, size_t dpitch, const void* from, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind, cudaStream_t s) {
  for (size_t row = 0; row < height; ++row) {
    const cudaError_t e =
        cudaMemcpyAsync(static_cast<char*>(to) + row * dpitch,
                        static_cast<const char*>(from) + row * spitch, width,
                        cudaMemcpyDefault, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaMemcpyPeerAsync(void* to, int, const void* from, int, size_t n, cudaStream_t s) {
  return cudaMemcpyAsync(to, from, n, cudaMemcpyDefault, s);
}

}  // extern "C"
