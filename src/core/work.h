// Work: the completion state of one issued operation (or group). It outlives
// the gang that issued it, so a handle can report its status after
// gang_destroy.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "core/error.h"

namespace gang::core {

class Work {
 public:
  // on_overdue runs (once, on the waiting thread) if the operation has not
  // ended `grace` after its deadline: the gang is then failed rather than
  // leaving its caller waiting forever.
  // api, id and gang name describe the operation in messages; the text is
  // only built if it is needed.
  Work(Clock::time_point deadline,
       std::function<void(const std::string&)> on_overdue, const char* api,
       uint64_t id, std::string gang_name);

  // The first completion wins; later ones are ignored.
  void complete(Status status, const std::string& message);

  // timeout < 0: until the operation ends (bounded by its deadline plus a
  // grace period); otherwise at most that long, then kInProgress.
  Status wait(Millis timeout, std::string* message);
  Status test(std::string* message) const;

  static constexpr Millis kGrace{2000};

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_ = Status::kInProgress;
  std::string message_;
  Clock::time_point deadline_;
  std::function<void(const std::string&)> on_overdue_;
  const char* api_;
  uint64_t id_;
  std::string gang_name_;
};

}  // namespace gang::core
