// The CUDA runtime and NCCL functions the NCCL backend calls, resolved
// from libcudart.so.13 and libnccl.so.2 with dlopen the first time a gang
// asks, so the module loads (and says what is missing) on machines without
// them. Types come from the real headers.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

namespace gang::backends::nccl_impl {

struct Api {
  // CUDA runtime
  decltype(&::cudaGetDeviceCount) GetDeviceCount;
  decltype(&::cudaSetDevice) SetDevice;
  decltype(&::cudaGetDevice) GetDevice;
  decltype(&::cudaGetErrorString) CudaErrorString;
  decltype(&::cudaStreamCreateWithFlags) StreamCreateWithFlags;
  decltype(&::cudaStreamDestroy) StreamDestroy;
  decltype(&::cudaStreamWaitEvent) StreamWaitEvent;
  decltype(&::cudaStreamQuery) StreamQuery;
  cudaError_t (*EventCreateWithFlags)(cudaEvent_t*, unsigned int);  // overloaded in C++
  decltype(&::cudaEventDestroy) EventDestroy;
  decltype(&::cudaEventRecord) EventRecord;
  decltype(&::cudaEventQuery) EventQuery;
  cudaError_t (*Malloc)(void**, size_t);  // overloaded in C++
  decltype(&::cudaFree) Free;
  decltype(&::cudaFreeAsync) FreeAsync;              // may be null (CUDA < 11.2)
  decltype(&::cudaStreamIsCapturing) StreamIsCapturing;  // may be null (CUDA < 10)
  // NCCL
  decltype(&::ncclGetVersion) GetVersion;
  decltype(&::ncclGetErrorString) NcclErrorString;
  decltype(&::ncclGetLastError) GetLastError;  // may be null (old NCCL)
  decltype(&::ncclGetUniqueId) GetUniqueId;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig;
  decltype(&::ncclCommSplit) CommSplit;  // may be null (NCCL < 2.18)
  decltype(&::ncclCommShrink) CommShrink;  // may be null (NCCL < 2.27)
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError;
  decltype(&::ncclCommAbort) CommAbort;
  decltype(&::ncclCommDestroy) CommDestroy;
  decltype(&::ncclCommFinalize) CommFinalize;
  decltype(&::ncclGroupStart) GroupStart;
  decltype(&::ncclGroupEnd) GroupEnd;
  decltype(&::ncclAllReduce) AllReduce;
  decltype(&::ncclReduce) Reduce;
  decltype(&::ncclBroadcast) Broadcast;
  decltype(&::ncclAllGather) AllGather;
  decltype(&::ncclReduceScatter) ReduceScatter;
  decltype(&::ncclSend) Send;
  decltype(&::ncclRecv) Recv;
  int nccl_version = 0;
  std::string cudart_file;  // the runtime in use, for messages
};

// The functions, loaded once per process; null with the reason in *why
// (which library or symbol is missing) if they cannot be.
const Api* load_api(std::string* why);

// "<what>: <CUDA's message>" and "<what>: <NCCL's message>", the latter
// with ncclGetLastError's text for comm (or the thread's last error when
// comm is null) where NCCL has one.
std::string cuda_text(const Api& api, const char* what, cudaError_t e);
std::string nccl_text(const Api& api, const char* what, ncclResult_t r, ncclComm_t comm = nullptr);

}  // namespace gang::backends::nccl_impl
