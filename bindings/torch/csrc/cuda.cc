#include "cuda.h"

#include <c10/util/Exception.h>

#include "errors.h"

#ifdef GANG_TORCH_CUDA
#include <cuda_runtime_api.h>

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace gang_torch {

#ifdef GANG_TORCH_CUDA

bool cuda_built() { return true; }

namespace {

c10::DeviceIndex index_of(int device) { return static_cast<c10::DeviceIndex>(device); }

// A CUDA event of one device (timing off: a mark only), used on that
// device whatever thread uses it. Written on the runtime's own functions,
// the same for every torch release (ATen's event class drags in the math
// libraries' headers).
class Event {
 public:
  explicit Event(int device) : device_(device) {
    c10::cuda::CUDAGuard guard(index_of(device_));
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~Event() {
    c10::cuda::CUDAGuard guard(index_of(device_));
    (void)cudaEventDestroy(event_);  // pending marks are kept by CUDA
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const c10::cuda::CUDAStream& stream) {
    c10::cuda::CUDAGuard guard(index_of(device_));
    C10_CUDA_CHECK(cudaEventRecord(event_, stream.stream()));
  }
  // `stream` (of the same device) waits for the last record.
  void block(const c10::cuda::CUDAStream& stream) {
    c10::cuda::CUDAGuard guard(index_of(device_));
    C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), event_, 0));
  }
  bool query() {
    c10::cuda::CUDAGuard guard(index_of(device_));
    const cudaError_t e = cudaEventQuery(event_);
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    C10_CUDA_CHECK(e);
    return true;
  }
  void synchronize() {
    c10::cuda::CUDAGuard guard(index_of(device_));
    C10_CUDA_CHECK(cudaEventSynchronize(event_));
  }

 private:
  const int device_;
  cudaEvent_t event_ = nullptr;
};

class EventEnd final : public StreamEnd {
 public:
  explicit EventEnd(int device) : device_(device), event_(device) {}
  void record(const c10::cuda::CUDAStream& stream) { event_.record(stream); }
  void order_current() override {
    event_.block(c10::cuda::getCurrentCUDAStream(index_of(device_)));
  }
  void synchronize() override { event_.synchronize(); }
  bool ended() override { return event_.query(); }

 private:
  const int device_;
  Event event_;
};

bool capturing(const c10::cuda::CUDAStream& stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream.stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

struct CudaSide::Device {
  gang_t* gang = nullptr;
  c10::cuda::CUDAStream stream;
  // One call at a time: gang's issue order is the stream's.
  std::mutex mutex;

  explicit Device(c10::cuda::CUDAStream s) : stream(s) {}
};

std::exception_ptr gang_failure(gang_t* gang, const char* what) {
  gang_status_t status = GANG_OK;
  if (gang_get_async_error(gang, &status) != GANG_OK || status == GANG_OK) return nullptr;
  // A failed gang refuses every call at once, with the failure's message
  // (no peer is reached): that message, on this thread, for error_of.
  const gang_status_t refused = gang_barrier(gang, nullptr);
  return error_of(refused != GANG_OK ? refused : status, what);
}

CudaSide::Device& CudaSide::device(int index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = devices_.find(index);
    if (it != devices_.end()) return *it->second;
  }
  // Made under a lock of its own: an abort meanwhile (mutex_) need not
  // wait for the peers.
  std::lock_guard<std::mutex> making(create_mutex_);
  size_t made;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = devices_.find(index);
    if (it != devices_.end()) return *it->second;
    made = devices_.size();
  }
  if (store_ == nullptr) {
    refuse("this process group runs on a gang made with gang's own API (as_process_group, "
           "shrink), which takes CPU tensors; for CUDA tensors make the group with "
           "init_process_group or new_group");
  }
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
  auto d = std::make_unique<Device>(
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(index)));
  // Named in the order the group's CUDA gangs are made, which is every
  // rank's (each rank's device index is its own).
  const std::string name = gang_name_ + ".cuda" + std::to_string(made);
  d->gang = meet(*store_, rank_, size_, timeout_ms_, name, index);
  gang_status_t status = gang_set_cuda_stream(d->gang, d->stream.stream());
  // A blocking call returns once its operation is on the gang's stream;
  // the backend's completer watches the call's end event.
  if (status == GANG_OK) status = gang_set_cuda_completion(d->gang, GANG_CUDA_COMPLETION_STREAM);
  if (status != GANG_OK) {
    std::exception_ptr error = error_of(status, "setting up the process group's CUDA gang");
    gang_destroy(d->gang);
    std::rethrow_exception(error);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Device& device = *d;
  devices_[index] = std::move(d);
  return device;
}

gang_t* CudaSide::gang(int index) { return device(index).gang; }

CudaIssued CudaSide::issue(int index, Plan& plan, const std::vector<at::Tensor>& outputs,
                           const char* name) {
  Device& d = device(index);
  std::lock_guard<std::mutex> lock(d.mutex);
  const c10::cuda::CUDAStream caller =
      c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index));
  const bool captured = capturing(caller);
  // The operations read what the caller's stream wrote before the call.
  Event ready(index);
  ready.record(caller);
  ready.block(d.stream);
  CudaIssued out;
  out.gang = d.gang;
  auto end = std::make_shared<EventEnd>(index);
  {
    c10::cuda::CUDAStreamGuard on_gang_stream(d.stream);
    // Blocking, not asynchronous: gang posts an asynchronous operation
    // from a thread of its own, after what follows it here on the stream.
    for (auto& step : plan.steps) {
      const gang_status_t status = step(nullptr);
      if (status != GANG_OK) {
        out.error = error_of(status, name);
        break;
      }
    }
    if (!out.error) {
      try {
        for (auto& fn : plan.after) fn();
      } catch (...) {
        out.error = std::current_exception();
      }
    }
    plan.after.clear();
    end->record(d.stream);
    if (!captured) {
      // Completed now, in stream order: its events are recorded on the
      // gang's stream, behind the operations.
      out.future = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index))});
      out.future->markCompleted(c10::IValue(outputs));
    }
  }
  out.end = std::move(end);
  return out;
}

void CudaSide::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [index, d] : devices_) gang_abort(d->gang);
}

void CudaSide::set_timeout(int64_t timeout_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ms_ = timeout_ms;
  for (auto& [index, d] : devices_) check(gang_set_timeout(d->gang, timeout_ms), "set_timeout");
}

CudaSide::~CudaSide() {
  for (auto& [index, d] : devices_) gang_destroy(d->gang);
}

#else  // a torch without CUDA

bool cuda_built() { return false; }

std::exception_ptr gang_failure(gang_t*, const char*) { return nullptr; }

struct CudaSide::Device {};

CudaSide::Device& CudaSide::device(int index) {
  refuse("tensors on cuda:" + std::to_string(index) +
         " need gang_torch built against a torch with CUDA; this one was built against a "
         "torch without it");
}

gang_t* CudaSide::gang(int index) {
  device(index);
  return nullptr;
}

CudaIssued CudaSide::issue(int index, Plan&, const std::vector<at::Tensor>&, const char*) {
  device(index);
  return {};
}

void CudaSide::abort() {}
void CudaSide::set_timeout(int64_t timeout_ms) { timeout_ms_ = timeout_ms; }
CudaSide::~CudaSide() = default;

#endif

CudaSide::CudaSide(std::shared_ptr<StoreHandle> store, int rank, int size, int64_t timeout_ms,
                   std::string gang_name)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      timeout_ms_(timeout_ms),
      gang_name_(std::move(gang_name)) {}

}  // namespace gang_torch
