// The CUDA side of a GangBackend: for each device, a CUDA gang (gang's
// NCCL backend) made on first use through the group's store, and the
// stream its operations run on. A call on CUDA tensors is stream-ordered as
// ProcessGroupNCCL's: that stream waits for the caller's current stream,
// the call's operations and what follows them (plan.after) run there, and
// an event marks their end. Waits make the caller's current stream wait for
// that event, never the host; the call's future is CUDA-aware and
// completed in stream order when the call returns, so its callbacks (DDP's
// comm hooks) are ordered after the operations without waiting for them.
// A build against a torch without CUDA has the same interface and refuses
// CUDA tensors.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <gang/gang.h>

#include "store.h"
#include "work.h"

namespace gang_torch {

// Whether this gang_torch was built against a CUDA torch.
bool cuda_built();

// Where one CUDA call's operations end on their device.
class StreamEnd {
 public:
  virtual ~StreamEnd() = default;
  // The calling thread's current stream of the device waits for the end.
  virtual void order_current() = 0;
  // The host waits for the end.
  virtual void synchronize() = 0;
  // Whether the device got there.
  virtual bool ended() = 0;
};

// The failure of a device's gang, as the exception for the call `what`;
// null while the gang is well.
std::exception_ptr gang_failure(gang_t* gang, const char* what);

// What a CUDA call left behind it.
struct CudaIssued {
  gang_t* gang = nullptr;  // the device's
  std::shared_ptr<StreamEnd> end;
  // Null when captured into a CUDA graph: nothing to watch.
  c10::intrusive_ptr<c10::ivalue::Future> future;
  std::exception_ptr error;  // a step that failed (those before it were issued)
};

class CudaSide {
 public:
  // `store` may be null (a backend on a gang of gang's own API): CUDA
  // tensors are then refused, saying why.
  CudaSide(std::shared_ptr<StoreHandle> store, int rank, int size, int64_t timeout_ms,
           std::string gang_name);
  ~CudaSide();
  CudaSide(const CudaSide&) = delete;
  CudaSide& operator=(const CudaSide&) = delete;

  // The device's gang, made on first use: collective over the group, and
  // it runs the communicator's first collective, so a program that holds
  // the device's streams should make it first (init_process_group's
  // device_id does, through eagerConnectSingleDevice).
  gang_t* gang(int device);
  // Issues plan's steps on the device's gang and runs plan.after behind
  // them, in stream order after the caller's current stream (plan.after is
  // emptied: nothing is left to run on the host). The steps are gang's
  // blocking calls in stream completion: each returns once enqueued.
  // `outputs` complete the future.
  CudaIssued issue(int device, Plan& plan, const std::vector<at::Tensor>& outputs,
                   const char* name);
  // Aborts every device's gang (what is in flight ends with an error).
  void abort();
  void set_timeout(int64_t timeout_ms);

 private:
  struct Device;
  Device& device(int index);

  std::shared_ptr<StoreHandle> store_;
  const int rank_, size_;
  std::atomic<int64_t> timeout_ms_;
  const std::string gang_name_;
  std::mutex create_mutex_;  // one device's gang made at a time
  std::mutex mutex_;         // guards devices_
  std::map<int, std::unique_ptr<Device>> devices_;
};

}  // namespace gang_torch
