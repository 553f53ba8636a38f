#include "backends/nccl/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace gang::backends::nccl_impl {

namespace {

// The first of `names` that dlopen can load, or null with every reason.
void* open_first(std::initializer_list<const char*> names, std::string* why) {
  std::string reasons;
  for (const char* n : names) {
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = ::dlerror();
    reasons += std::string(reasons.empty() ? "" : "; ") + (e ? e : n);
  }
  *why = reasons;
  return nullptr;
}

template <typename F>
bool resolve(void* lib, const char* library, const char* name, F* out, std::string* why,
             bool optional = false) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  if (*out == nullptr && !optional) {
    *why = std::string(library) + " has no " + name + " (too old?)";
    return false;
  }
  return true;
}

struct Loaded {
  Api api{};
  std::string why;
  bool ok = false;
};

// The CUDA runtime: one already in the process first (a PyTorch built for
// CUDA 12 has loaded libcudart.so.12, and a second runtime beside it would
// be a second context), else the newest the driver takes: a runtime newer
// than the driver answers cudaErrorInsufficientDriver, and the next older
// one is tried.
void* open_cudart(std::string* file, std::string* why) {
  static const char* const kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  for (const char* n : kNames) {
    if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
      *file = n;
      return h;
    }
  }
  std::string reasons;
  void* first = nullptr;  // the newest that loads, should no driver take any
  const char* first_name = nullptr;
  for (const char* n : kNames) {
    void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = ::dlerror();
      reasons += std::string(reasons.empty() ? "" : "; ") + (e ? e : n);
      continue;
    }
    auto count = reinterpret_cast<decltype(&::cudaGetDeviceCount)>(::dlsym(h, "cudaGetDeviceCount"));
    int devices = 0;
    if (count != nullptr && count(&devices) == cudaErrorInsufficientDriver) {
      if (first == nullptr) {
        first = h;
        first_name = n;
      }
      continue;
    }
    *file = n;
    return h;
  }
  if (first != nullptr) {  // it will say what is missing (no driver, no device)
    *file = first_name;
    return first;
  }
  *why = reasons;
  return nullptr;
}

Loaded load() {
  Loaded l;
  Api& a = l.api;
  std::string why;
  // GANG_CUDART_LIBRARY and GANG_NCCL_LIBRARY name other files to load.
  const char* cudart_file = std::getenv("GANG_CUDART_LIBRARY");
  const char* nccl_file = std::getenv("GANG_NCCL_LIBRARY");
  void* cudart = nullptr;
  if (cudart_file != nullptr) {
    cudart = open_first({cudart_file}, &why);
    a.cudart_file = cudart_file;
  } else {
    cudart = open_cudart(&a.cudart_file, &why);
  }
  if (cudart == nullptr) {
    l.why = "the CUDA runtime (libcudart.so.13 or .12) cannot be loaded: " + why;
    return l;
  }
  void* nccl = nccl_file != nullptr ? open_first({nccl_file}, &why) : nullptr;
  if (nccl_file == nullptr) {
    nccl = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (nccl == nullptr) nccl = open_first({"libnccl.so.2"}, &why);
  }
  if (nccl == nullptr) {
    l.why = "NCCL (libnccl.so.2) cannot be loaded: " + why;
    return l;
  }
  const char* c = "the CUDA runtime";
  const char* n = "libnccl.so.2";
  const bool ok =
      resolve(cudart, c, "cudaGetDeviceCount", &a.GetDeviceCount, &l.why) &&
      resolve(cudart, c, "cudaSetDevice", &a.SetDevice, &l.why) &&
      resolve(cudart, c, "cudaGetDevice", &a.GetDevice, &l.why) &&
      resolve(cudart, c, "cudaGetErrorString", &a.CudaErrorString, &l.why) &&
      resolve(cudart, c, "cudaStreamCreateWithFlags", &a.StreamCreateWithFlags, &l.why) &&
      resolve(cudart, c, "cudaStreamDestroy", &a.StreamDestroy, &l.why) &&
      resolve(cudart, c, "cudaStreamWaitEvent", &a.StreamWaitEvent, &l.why) &&
      resolve(cudart, c, "cudaStreamQuery", &a.StreamQuery, &l.why) &&
      resolve(cudart, c, "cudaEventCreateWithFlags", &a.EventCreateWithFlags, &l.why) &&
      resolve(cudart, c, "cudaEventDestroy", &a.EventDestroy, &l.why) &&
      resolve(cudart, c, "cudaEventRecord", &a.EventRecord, &l.why) &&
      resolve(cudart, c, "cudaEventQuery", &a.EventQuery, &l.why) &&
      resolve(cudart, c, "cudaMalloc", &a.Malloc, &l.why) &&
      resolve(cudart, c, "cudaFree", &a.Free, &l.why) &&
      resolve(cudart, c, "cudaFreeAsync", &a.FreeAsync, &l.why, true) &&
      resolve(cudart, c, "cudaStreamIsCapturing", &a.StreamIsCapturing, &l.why, true) &&
      resolve(nccl, n, "ncclGetVersion", &a.GetVersion, &l.why) &&
      resolve(nccl, n, "ncclGetErrorString", &a.NcclErrorString, &l.why) &&
      resolve(nccl, n, "ncclGetLastError", &a.GetLastError, &l.why, true) &&
      resolve(nccl, n, "ncclGetUniqueId", &a.GetUniqueId, &l.why) &&
      resolve(nccl, n, "ncclCommInitRankConfig", &a.CommInitRankConfig, &l.why) &&
      resolve(nccl, n, "ncclCommSplit", &a.CommSplit, &l.why, true) &&
      resolve(nccl, n, "ncclCommShrink", &a.CommShrink, &l.why, true) &&
      resolve(nccl, n, "ncclCommGetAsyncError", &a.CommGetAsyncError, &l.why) &&
      resolve(nccl, n, "ncclCommAbort", &a.CommAbort, &l.why) &&
      resolve(nccl, n, "ncclCommDestroy", &a.CommDestroy, &l.why) &&
      resolve(nccl, n, "ncclCommFinalize", &a.CommFinalize, &l.why) &&
      resolve(nccl, n, "ncclGroupStart", &a.GroupStart, &l.why) &&
      resolve(nccl, n, "ncclGroupEnd", &a.GroupEnd, &l.why) &&
      resolve(nccl, n, "ncclAllReduce", &a.AllReduce, &l.why) &&
      resolve(nccl, n, "ncclReduce", &a.Reduce, &l.why) &&
      resolve(nccl, n, "ncclBroadcast", &a.Broadcast, &l.why) &&
      resolve(nccl, n, "ncclAllGather", &a.AllGather, &l.why) &&
      resolve(nccl, n, "ncclReduceScatter", &a.ReduceScatter, &l.why) &&
      resolve(nccl, n, "ncclSend", &a.Send, &l.why) &&
      resolve(nccl, n, "ncclRecv", &a.Recv, &l.why);
  if (!ok) return l;
  if (a.GetVersion(&a.nccl_version) != ncclSuccess) a.nccl_version = 0;
  l.ok = true;
  return l;
}

}  // namespace

const Api* load_api(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

std::string cuda_text(const Api& api, const char* what, cudaError_t e) {
  return std::string(what) + ": " + api.CudaErrorString(e);
}

std::string nccl_text(const Api& api, const char* what, ncclResult_t r, ncclComm_t comm) {
  std::string text = std::string(what) + ": " + api.NcclErrorString(r);
  const char* last = api.GetLastError != nullptr ? api.GetLastError(comm) : nullptr;
  if (last != nullptr && last[0] != '\0') text += std::string(" (") + last + ")";
  return text;
}

}  // namespace gang::backends::nccl_impl
