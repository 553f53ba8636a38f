#include "work.h"

#include <c10/util/Exception.h>

#include "callbacks.h"
#include "cuda.h"
#include "errors.h"

namespace gang_torch {
namespace {

// How long the completer waits on one work before it looks for new ones.
constexpr int64_t kSlice = 50;

// How long a blocking wait on the signal thread waits between checks.
constexpr int64_t kSignalSlice = 100;

// How often the completer looks whether a CUDA call ended on its device:
// it only releases the call's tensors and finds failures (is_completed()
// asks the device itself).
constexpr int64_t kCudaPollUs = 1000;

std::thread::id signal_thread;
void (*signal_check)() = nullptr;

c10::intrusive_ptr<c10::ivalue::Future> new_future() {
  return c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

void set_signal_check(std::thread::id thread, void (*check)()) {
  signal_thread = thread;
  signal_check = check;
}

bool on_signal_thread() {
  return signal_check != nullptr && std::this_thread::get_id() == signal_thread;
}

void check_signals() {
  if (on_signal_thread()) signal_check();
}

namespace {
std::mutex blocking_mutex;
gang_t* blocking_gang = nullptr;
}  // namespace

BlockingCall::BlockingCall(gang_t* gang) : on_(on_signal_thread()) {
  if (!on_) return;
  std::lock_guard<std::mutex> lock(blocking_mutex);
  blocking_gang = gang;
}

BlockingCall::~BlockingCall() {
  if (!on_) return;
  std::lock_guard<std::mutex> lock(blocking_mutex);
  blocking_gang = nullptr;
}

void abort_blocking() {
  std::lock_guard<std::mutex> lock(blocking_mutex);
  if (blocking_gang != nullptr) gang_abort(blocking_gang);
}

GangWork::GangWork(int rank, c10d::OpType type, uint64_t seq, const char* name,
                   std::vector<at::Tensor> outputs, gang_t* gang)
    : c10d::Work(rank, type), seq_(seq), name_(name), outputs_(std::move(outputs)),
      gang_(gang) {}

GangWork::~GangWork() {
  for (gang_work_t* w : works_) gang_work_destroy(w);
}

c10::intrusive_ptr<GangWork> GangWork::done(int rank, c10d::OpType type, uint64_t seq,
                                            const char* name,
                                            std::vector<at::Tensor> outputs) {
  auto work = c10::make_intrusive<GangWork>(rank, type, seq, name, std::move(outputs), nullptr);
  work->completed_ = true;
  return work;
}

void GangWork::synchronize() {
  if (end_) end_->order_current();
}

bool GangWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_ || !end_) return completed_;
  }
  return end_->ended() && !gang_failure(gang_, name_);
}

bool GangWork::wait(std::chrono::milliseconds timeout) {
  if (end_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (exception_) std::rethrow_exception(exception_);
    }
    end_->order_current();
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  auto until = std::chrono::steady_clock::now() + timeout;
  bool forever = timeout == kNoTimeout;
  if (on_signal_thread()) {
    // In slices, checking for Ctrl-C between them.
    while (!completed_ && (forever || std::chrono::steady_clock::now() < until)) {
      auto slice = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSignalSlice);
      cv_.wait_until(lock, forever ? slice : std::min(slice, until), [this] { return completed_; });
      if (completed_) break;
      lock.unlock();
      try {
        signal_check();
      } catch (...) {
        abort();
        throw;
      }
      lock.lock();
    }
  } else if (forever) {
    cv_.wait(lock, [this] { return completed_; });
  } else {
    cv_.wait_until(lock, until, [this] { return completed_; });
  }
  if (!completed_) {
    C10_THROW_ERROR(DistBackendError,
                    c10::str("gang: ", name_, " #", seq_, " Timed out in Work.wait after ",
                             timeout.count(), " ms; it goes on until the process group's "
                             "own timeout ends it"));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> GangWork::getFuture() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!future_) {
    future_ = new_future();
    if (completed_) {
      // No callback can be attached yet: completing it here runs none.
      if (exception_) {
        future_->setError(exception_);
      } else {
        future_->markCompleted(c10::IValue(outputs_));
      }
    }
  }
  return future_;
}

int GangWork::sourceRank() const {
  TORCH_CHECK(source_ != nullptr, "gang: sourceRank() belongs to a receive from any source");
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, "gang: sourceRank() of a receive that has not completed");
  return *source_;
}

void GangWork::abort() {
  if (gang_ != nullptr) gang_abort(gang_);
}

void GangWork::adopt(Plan plan, std::vector<gang_work_t*> works) {
  plan_ = std::move(plan);
  works_ = std::move(works);
}

void GangWork::adopt_cuda(Plan plan, std::shared_ptr<StreamEnd> end,
                          c10::intrusive_ptr<c10::ivalue::Future> future) {
  plan_ = std::move(plan);
  end_ = std::move(end);
  if (future) {
    future_ = std::move(future);
    future_completed_ = true;
  }
}

bool GangWork::settle(gang_status_t status) {
  if (status == GANG_IN_PROGRESS) return false;
  if (status != GANG_OK && status_ == GANG_OK) {
    status_ = status;
    error_ = error_of(status, name_);
  }
  return true;
}

bool GangWork::poll() {
  if (end_) {
    // A CUDA call: done when the device got to its end, failed when its
    // gang failed first.
    if (!error_) error_ = gang_failure(gang_, name_);
    return error_ || end_->ended();
  }
  while (ended_ < works_.size()) {
    if (!settle(gang_work_test(works_[ended_]))) return false;
    ++ended_;
  }
  return true;
}

bool GangWork::drive(int64_t wait_ms) {
  if (end_) {
    // A CUDA call: polled for the device's end, in short sleeps.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (!poll()) {
      if (wait_ms >= 0 && std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(kCudaPollUs));
    }
    return true;
  }
  while (ended_ < works_.size()) {
    if (!settle(gang_work_wait(works_[ended_], wait_ms))) return false;
    ++ended_;
  }
  return true;
}

void GangWork::finish() {
  std::exception_ptr error = error_;
  if (!error) {
    try {
      for (auto& fn : plan_.after) fn();
    } catch (...) {
      error = std::current_exception();
    }
  }
  plan_ = Plan();  // the buffers go once the work is done
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
    if (!future_completed_) future = future_;
  }
  cv_.notify_all();
  if (future) {
    std::vector<at::Tensor> outputs = outputs_;
    run_callback([future, outputs, error] {
      if (error) {
        future->setError(error);
      } else {
        future->markCompleted(c10::IValue(outputs));
      }
    });
  }
}

void Completer::submit(c10::intrusive_ptr<GangWork> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!stopping_, "gang: the process group ", name_, " was shut down");
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  queue_.push_back(std::move(work));
  ++in_flight_;
  wake_.notify_one();
}

bool Completer::busy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_ > 0;
}

void Completer::stop(std::chrono::milliseconds grace, const std::function<void()>& abort) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    wake_.notify_one();
    if (!idle_.wait_for(lock, grace, [this] { return in_flight_ == 0; }) && abort) abort();
  }
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
  }
}

// Works end in issue order on one gang, save sends and receives, which
// match when their peers get to them: with one work in flight the thread
// waits for it; with more it waits briefly on the oldest and polls the
// others, so a receive still waiting never holds up what came after it.
void Completer::run() {
  std::deque<c10::intrusive_ptr<GangWork>> pending;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !pending.empty(); });
      while (!queue_.empty()) {
        pending.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (pending.empty() && stopping_) return;
    }
    if (pending.empty()) continue;
    bool progressed = false;
    if (pending.size() == 1) {
      // In slices, to take in what is submitted meanwhile.
      progressed = pending.front()->drive(kSlice);
    } else {
      for (auto& w : pending) progressed = w->poll() || progressed;
      if (!progressed) progressed = pending.front()->drive(1);
    }
    if (!progressed) continue;
    size_t finished = 0;
    for (auto it = pending.begin(); it != pending.end();) {
      if ((*it)->poll()) {
        (*it)->finish();
        it = pending.erase(it);
        ++finished;
      } else {
        ++it;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ -= finished;
    if (in_flight_ == 0) idle_.notify_all();
  }
}

}  // namespace gang_torch
