// Work: the completion state of one issued operation (or group), behind a
// gang_work_t and behind every blocking call. It outlives the gang that
// issued it, so a handle can report its status after gang_destroy.
//
// An operation reaches the backend through one or more posts ("feeders"):
// the executor posts collectives in issue order, and point-to-point
// operations of a tagged backend are posted the moment they are issued. Each
// feeder hands over what is left to wait for (a BackendWork, or nothing when
// the backend finished inside post). The thread that waits or tests drives
// those backend works; one thread at a time does, the others wait for it.
//
// Deadlines hold on every path: wait(-1), wait(t) and test() all fail an
// operation that has not ended `kGrace` after its deadline with kTimeout
// (and fail its gang). The backend normally ends it at the deadline itself,
// with a more precise error; the grace lets that error win.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/backend.h"

namespace gang::core {

class Gang;
class FlightRecorder;

class Work {
 public:
  static constexpr Millis kGrace{2000};

  // api and id describe the operation in messages; `feeders` posts will
  // hand over their part. The gang is told about failures (and fails).
  Work(std::weak_ptr<Gang> gang, std::shared_ptr<FlightRecorder> recorder,
       const char* api, uint64_t id, Clock::time_point deadline, int feeders);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // A feeder's part is posted; `pending` (null: finished) is left to wait
  // for.
  void posted(BackendWorkPtr pending);
  // A feeder failed: the operation fails with the gang's view of the error
  // (the first error of the gang, if an earlier one caused this).
  void failed(Status status, const std::string& what);
  // Ends the operation with exactly this status and message (the first
  // ending wins; later ones are ignored). The gang is not told.
  void complete(Status status, const std::string& message);

  // timeout < 0: until the operation ends (bounded by its deadline plus the
  // grace); otherwise at most that long, then kInProgress.
  Status wait(Millis timeout, std::string* message);
  // Never blocks for long.
  Status test(std::string* message);

  // Whether it has ended, without driving anything.
  bool ended();

  uint64_t id() const { return id_; }
  const char* api() const { return api_; }

 private:
  // Drives the pending backend works (lock held on entry and exit; released
  // while driving). `blocking`: wait until `until`, else only test.
  void drive(std::unique_lock<std::mutex>& lock, bool blocking,
             Clock::time_point until);
  // Fails the operation and its gang if it outlived deadline + kGrace.
  // Lock held on entry and exit.
  void check_overdue(std::unique_lock<std::mutex>& lock);
  void finish_locked(Status status, const std::string& message);

  std::weak_ptr<Gang> gang_;
  std::shared_ptr<FlightRecorder> recorder_;
  const char* api_;
  uint64_t id_;
  Clock::time_point deadline_;

  std::mutex mu_;
  std::condition_variable cv_;
  int feeders_;
  std::vector<BackendWorkPtr> pending_;
  bool driving_ = false;
  bool done_ = false;
  Status status_ = Status::kInProgress;
  std::string message_;
};

}  // namespace gang::core
