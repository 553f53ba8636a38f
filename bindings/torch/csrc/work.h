// The Work of one c10d call on gang, and the thread that completes the
// asynchronous ones.
//
// A call is planned as gang operations (Plan::steps) on flat views of the
// tensors, and what must follow them (Plan::after: copies out of staging
// buffers, the local half of a bitwise reduction). Blocking calls run the
// plan on the caller's thread and return a Work that is done. Asynchronous
// ones hand gang's works to the backend's Completer, which waits for them,
// runs what follows, completes the Work (wait, is_completed, exception)
// and passes its future to the callback pool (callbacks.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <gang/gang.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace gang_torch {

// Ctrl-C. The Python module sets the thread that takes signals (Python's
// main thread) and a check that throws what a pending signal handler
// raised there (KeyboardInterrupt). A blocking call on that thread is one
// call into gang, registered for the module's SIGINT watcher to abort
// (abort_blocking); waits on a Work there run in slices with the check in
// between. Either way the gang is aborted and the call ends with the
// handler's exception, as in gang's own Python API.
void set_signal_check(std::thread::id thread, void (*check)());

// Whether this thread is the signal thread.
bool on_signal_thread();

// Throws what a pending signal handler raises, on the signal thread.
void check_signals();

// Around a blocking call on the signal thread: the gang abort_blocking()
// aborts (the watcher's side: async-signal-safe it need not be, it runs
// on the watcher thread).
class BlockingCall {
 public:
  explicit BlockingCall(gang_t* gang);
  ~BlockingCall();
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;

 private:
  bool on_ = false;
};
void abort_blocking();

// Issues one gang operation: blocking with nullptr, else returns its work.
using Step = std::function<gang_status_t(gang_work_t**)>;

// Where a CUDA call ends on its device (cuda.h).
class StreamEnd;

struct Plan {
  std::vector<Step> steps;
  std::vector<std::function<void()>> after;
  // Where its tensors are: kCpu, a CUDA device (one per call), or
  // kUnplaced until a tensor says.
  static constexpr int kCpu = -1;
  static constexpr int kUnplaced = -2;
  int device = kUnplaced;

  void step(Step s) { steps.push_back(std::move(s)); }
  void then(std::function<void()> fn) { after.push_back(std::move(fn)); }
};

class GangWork : public c10d::Work {
 public:
  GangWork(int rank, c10d::OpType type, uint64_t seq, const char* name,
           std::vector<at::Tensor> outputs, gang_t* gang);
  ~GangWork() override;

  // A work already done (a blocking call's).
  static c10::intrusive_ptr<GangWork> done(int rank, c10d::OpType type, uint64_t seq,
                                           const char* name, std::vector<at::Tensor> outputs);

  // A CUDA call's wait and synchronize order the caller's current stream
  // after the call's end and return, as ProcessGroupNCCL's do (with
  // GANG_TORCH_SYNC=1 the host waits too); a CPU call's wait waits.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  // A CUDA call's: whether the device got to its end, asked of the device
  // (the completer learns it within a millisecond).
  bool isCompleted() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }
  int sourceRank() const override;
  void abort() override;

  // The Completer's side.
  void adopt(Plan plan, std::vector<gang_work_t*> works);
  // A CUDA call's: its plan (whose steps hold the tensors until the device
  // is done), where it ends, and its future, already completed in stream
  // order. gang_ is the device's gang, whose failure fails the work.
  void adopt_cuda(Plan plan, std::shared_ptr<StreamEnd> end,
                  c10::intrusive_ptr<c10::ivalue::Future> future);
  bool poll();                // true once every gang work ended
  bool drive(int64_t wait_ms);  // waits up to wait_ms (-1: until the end)
  void finish();              // runs what follows, completes work and future
  // A receive from any peer: where gang writes the sender.
  void set_source(std::shared_ptr<int> slot) { source_ = std::move(slot); }

 private:
  bool settle(gang_status_t status);

  const uint64_t seq_;
  const char* const name_;
  std::vector<at::Tensor> outputs_;
  gang_t* gang_;  // aborted by abort(); not owned
  Plan plan_;
  std::vector<gang_work_t*> works_;
  size_t ended_ = 0;  // works_[0, ended_) have ended
  gang_status_t status_ = GANG_OK;
  std::exception_ptr error_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool future_completed_ = false;  // a CUDA call's, when it was issued
  std::shared_ptr<StreamEnd> end_;  // a CUDA call's
  std::shared_ptr<int> source_;
};

// One thread per backend, started on the first asynchronous call.
class Completer {
 public:
  explicit Completer(std::string name) : name_(std::move(name)) {}
  ~Completer() { stop(std::chrono::milliseconds(0), nullptr); }

  void submit(c10::intrusive_ptr<GangWork> work);
  // Whether works are still in flight.
  bool busy();
  // Takes no more work; waits up to `grace` for what is in flight, then
  // calls `abort` (if any: it aborts the gangs so that it ends), and ends
  // the thread.
  void stop(std::chrono::milliseconds grace, const std::function<void()>& abort);

 private:
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<c10::intrusive_ptr<GangWork>> queue_;
  size_t in_flight_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gang_torch
