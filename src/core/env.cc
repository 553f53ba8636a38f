#include "core/env.h"

#include <algorithm>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "base/env.h"
#include "base/error.h"

namespace gang::core::env {

namespace {

const char* raw(const char* name) { return base::env(name); }

long long parse_int(const char* name, const char* value, long long lo,
                    long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < lo || v > hi) {
    fail(Status::kInvalidArgument, name, "=\"", value,
         "\" is not an integer in [", lo, ", ", hi, "]");
  }
  return v;
}

}  // namespace

std::chrono::milliseconds timeout() {
  const char* v = raw("GANG_TIMEOUT_MS");
  if (!v) return kDefaultTimeout;
  return std::chrono::milliseconds(parse_int(
      "GANG_TIMEOUT_MS", v, 1, std::numeric_limits<int64_t>::max() / 1000000));
}

std::chrono::milliseconds wait_warn_interval() {
  const char* v = raw("GANG_WAIT_WARN_S");
  if (!v || !*v) return kDefaultWaitWarn;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !(s >= 0) || s > 1e9) {
    fail(Status::kInvalidArgument, "GANG_WAIT_WARN_S must be a number of "
         "seconds >= 0 (0: no warnings), not \"", v, "\"");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

namespace {

std::chrono::milliseconds millis_or(const char* name,
                                    std::chrono::milliseconds fallback,
                                    long least) {
  const char* v = raw(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long ms = std::strtol(v, &end, 10);
  if (*end != '\0' || ms < least || ms > 86400000L) {
    fail(Status::kInvalidArgument, name, " must be a whole number of "
         "milliseconds >= ", least, ", not \"", v, "\"");
  }
  return std::chrono::milliseconds(ms);
}

}  // namespace

std::chrono::milliseconds shrink_form() {
  return millis_or("GANG_SHRINK_FORM_MS", kDefaultShrinkForm, 1);
}

std::string fault_points() {
  const char* v = raw("GANG_FAULT_POINT");
  return v ? v : "";
}

std::chrono::milliseconds failure_detect() {
  return millis_or("GANG_FAILURE_DETECT_MS", kDefaultFailureDetect, 100);
}

std::string socket_ifname() {
  const char* v = raw("GANG_SOCKET_IFNAME");
  return v ? v : "";
}

std::string init_method() {
  const char* v = raw("GANG_INIT_METHOD");
  return v ? v : "";
}

bool joiner(std::string* replaces) {
  const char* v = raw("GANG_JOIN");
  if (!v || std::strcmp(v, "0") == 0) return false;
  const char* r = raw("GANG_REPLACES");
  *replaces = r ? r : "";
  return true;
}

Launch detect() { return detect_from(raw); }

void torch_master(Launch* l) { torch_master_from(raw, l); }

std::string flight_recorder_path() {
  const char* v = raw("GANG_FLIGHT_RECORDER");
  if (!v || std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) return "";
  return v;
}

std::vector<std::string> plugin_path() {
  std::vector<std::string> dirs;
  const char* v = raw("GANG_PLUGIN_PATH");
  if (!v) return dirs;
  std::string all = v;
  size_t start = 0;
  while (start <= all.size()) {
    const size_t end = std::min(all.find(':', start), all.size());
    if (end > start) dirs.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

bool debug_checks() {
  const char* v = raw("GANG_DEBUG");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "off") == 0) return false;
  if (std::strcmp(v, "detail") == 0) return true;
  fail(Status::kInvalidArgument, "GANG_DEBUG=\"", v,
       "\" is not a debug level: use \"detail\" (check every operation) or "
       "\"off\"");
}

LogLevel log_level() {
  const char* v = raw("GANG_LOG_LEVEL");
  if (!v) return LogLevel::kWarn;
  if (!std::strcmp(v, "error")) return LogLevel::kError;
  if (!std::strcmp(v, "info")) return LogLevel::kInfo;
  if (!std::strcmp(v, "debug")) return LogLevel::kDebug;
  return LogLevel::kWarn;
}

}  // namespace gang::core::env
