// The executor of one gang: posts its ordered operations (collectives, and
// point-to-point on backends without tags) to the backend in issue order.
//
// A blocking call issued while nothing is queued is posted on the caller's
// thread: no thread hand-off on the hot path. Everything else goes to a
// worker thread started on first need. Either way one task is posted at a
// time, so every rank posts its collectives in the same order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/deadline.h"
#include "core/backend.h"

namespace gang::core {

class Work;

// Operations posted together (one, or a group's), and the work they feed.
struct Task {
  std::vector<Operation> ops;
  std::shared_ptr<Work> work;
};

class Executor {
 public:
  // `post` posts a task and hands its result to the task's work; it must
  // not throw.
  explicit Executor(std::function<void(Task&)> post);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // async false and nothing queued or running: runs on this thread and
  // returns once posted. Otherwise queues it and returns.
  void submit(std::shared_ptr<Task> task, bool async);

  // The blocking call's path: if nothing is queued or running, runs
  // post() on this thread and returns true; otherwise runs nothing and
  // returns false (the caller submits a task instead). Nothing is
  // allocated: no task, no hand-off.
  template <typename Post>
  bool run_here(Post&& post) {
    if (!enter_here()) return false;
    struct Leave {
      Executor& e;
      ~Leave() { e.leave_here(); }
    } leave{*this};
    post();
    return true;
  }

  // Waits until nothing is queued or running, at most until `until`; true
  // if idle.
  bool wait_idle(Clock::time_point until);
  // Stops taking tasks, lets the worker finish the queue, joins it. Then
  // waits (at most `grace`) for a caller-thread post still running.
  void stop(Millis grace);

 private:
  void worker_loop();
  // run_here's bracket: claims the executor for this thread (false when
  // busy or something is queued) and gives it back.
  bool enter_here();
  void leave_here();

  std::function<void(Task&)> post_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace gang::core
