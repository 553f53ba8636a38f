#include "core/briefly.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace gang::core {

std::string briefly(std::function<std::string()> f, Millis limit) noexcept {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::string result;
  };
  try {
    auto state = std::make_shared<State>();
    std::thread([state, f = std::move(f)] {
      std::string r;
      try {
        r = f();
      } catch (...) {
        // The store is gone: no record, and no cause to name.
      }
      std::lock_guard<std::mutex> lock(state->mu);
      state->result = std::move(r);
      state->done = true;
      state->cv.notify_all();
    }).detach();
    std::unique_lock<std::mutex> lock(state->mu);
    if (!state->cv.wait_for(lock, limit, [&] { return state->done; })) return "";
    return state->result;
  } catch (...) {
    return "";  // no thread to spare
  }
}

}  // namespace gang::core
