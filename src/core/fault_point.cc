#include "core/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/env.h"

namespace gang::core {

void fault_point(const char* name) {
  const std::string points = env::fault_points();
  if (points.empty()) return;
  const size_t len = std::strlen(name);
  for (size_t at = 0; at < points.size();) {
    size_t end = points.find(',', at);
    if (end == std::string::npos) end = points.size();
    const std::string entry = points.substr(at, end - at);
    at = end + 1;
    if (entry.compare(0, len, name) != 0 || (entry.size() > len && entry[len] != ':')) continue;
    const std::string what = entry.size() > len ? entry.substr(len + 1) : "kill";
    if (what == "stop") {
      ::raise(SIGSTOP);
    } else if (what.rfind("sleep=", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atol(what.c_str() + 6)));
    } else {
      ::raise(SIGKILL);
    }
  }
}

}  // namespace gang::core
