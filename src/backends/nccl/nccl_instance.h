// One NCCL gang of one process: its communicator, streams, works and
// watchdog, and the rules every path that touches them keeps.
//
// The rules (NCCL 2.28's and CUDA 13's, as c10d keeps them too):
// - Every CUDA and NCCL call runs under a DeviceGuard for the instance's
//   device, which restores the caller's device afterwards: the module never
//   leaves a thread on another device, and no thread of its own touches
//   device 0 by accident.
// - Every call on the communicator, ncclCommGetAsyncError included, runs
//   under comm_mu, one at a time. The lock is held for single calls, never
//   across a wait: a call that returned ncclInProgress is polled (Instance::
//   poll) by taking the lock for each ncclCommGetAsyncError and yielding in
//   between, so the watchdog and abort are never held up for long.
// - Abort never runs on the caller's thread: abort() marks the instance and
//   hands ncclCommAbort (which can take seconds) to a thread of its own;
//   destroy waits for it, for 10 s at most.
// - Every return code is checked; NCCL's own text (ncclGetLastError) goes
//   into the message.
#pragma once

#include <gang/gang_backend.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/nccl/nccl_api.h"

namespace gang::backends::nccl_impl {

int64_t now_ns();
void say(char* err, size_t len, const std::string& text);
gang_status_t status_of(ncclResult_t r);

// The failure of a work still on the GPU at its deadline.
extern const char kLate[];

// Selects a device for the scope and restores the thread's previous one.
class DeviceGuard {
 public:
  DeviceGuard(const Api& api, int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // cudaSuccess, or why the device could not be selected.
  cudaError_t status() const { return status_; }

 private:
  const Api& api_;
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

struct Instance;

// One post's work, pooled: its two events are made once and reused, so a
// steady stream of operations creates none.
struct Work {
  Instance* inst = nullptr;
  cudaEvent_t ready = nullptr;  // the caller's stream reached the post (own stream only)
  cudaEvent_t done = nullptr;   // the operations ended on their stream
  cudaStream_t caller = nullptr;  // the stream the caller's results are ordered on
  bool own_stream = false;        // enqueued on the instance's stream
  bool stream_completion = false;  // wait() orders the caller's stream only
  bool stream_waited = false;
  int64_t deadline_ns = 0;
  std::atomic<gang_status_t> status{GANG_IN_PROGRESS};
  bool released = false;  // work_free was called (under Instance::mu)
};

struct Instance {
  const Api* api = nullptr;
  int rank = 0, size = 1, device = 0;
  int64_t timeout_ms = 600000;
  std::string name;
  ncclComm_t comm = nullptr;
  cudaStream_t own = nullptr;
  int* scratch = nullptr;  // a device int for barriers

  // Held for each call on the communicator (see the rules above).
  std::mutex comm_mu;
  bool comm_gone = false;  // aborted or destroyed (under comm_mu)
  bool finalized = false;  // ncclCommFinalize completed (under comm_mu)
  std::atomic<bool> aborted{false};

  std::mutex mu;  // guards everything below
  std::condition_variable cv;
  std::vector<Work*> live;  // posted, not yet recycled
  std::vector<Work*> pool;  // ready for reuse
  gang_status_t error = GANG_OK;
  std::string error_text;
  bool stop = false;
  std::thread watchdog;
  std::thread aborter;  // runs ncclCommAbort off the caller's thread
  bool abort_done = false;

  // The first failure wins; starts the communicator's abort.
  void fail(gang_status_t status, const std::string& text);
  // Marks the instance aborted (once) and starts ncclCommAbort on the
  // aborter thread.
  void begin_abort();
  gang_status_t failed(std::string* text);
  // Why an operation found the instance aborted: the failure that started
  // the abort (a lost peer stays GANG_ERR_PEER_LOST, a late work
  // GANG_ERR_TIMEOUT), GANG_ERR_ABORTED only for an abort asked for.
  gang_status_t abort_cause(std::string* text);
  // nccl_text with the communicator's last error, if it is still there.
  // Takes comm_mu.
  std::string comm_text(const char* what, ncclResult_t r);

  // Polls comm until its last call is no longer in progress, yielding in
  // between, until deadline_ns or an abort: the call's result (ncclSuccess,
  // its error, or ncclInProgress at the deadline or after an abort). A
  // failed poll is returned as its own error.
  ncclResult_t poll(ncclComm_t c, int64_t deadline_ns);

  void watch();
};

// The module's functions, by file.
int probe(char* why, size_t why_len);
gang_status_t create(const gang_backend_config_t* c, void** out, char* err, size_t err_len);
gang_status_t split(void* parent, const gang_backend_config_t* c, void** out, char* err,
                    size_t err_len);
gang_status_t shrink(void* parent, const int32_t* excluded, size_t nexcluded,
                     const gang_backend_config_t* c, void** out, char* err, size_t err_len);
void destroy(void* backend);
void finalize(void* backend);
void abort_instance(void* backend);
gang_status_t poll_error(void* backend, char* err, size_t err_len);
int32_t device_of(void* backend);

gang_status_t post(void* backend, const gang_backend_op_t* ops, size_t nops, void** work,
                   char* err, size_t err_len);
gang_status_t test(void* work, char* err, size_t err_len);
gang_status_t wait(void* work, int64_t until_ns, char* err, size_t err_len);
void work_free(void* work);
// Frees the pooled works' events (destroy).
void free_pool(Instance& in);

}  // namespace gang::backends::nccl_impl
