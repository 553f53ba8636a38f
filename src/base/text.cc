#include "base/text.h"

#include <pwd.h>
#include <sys/time.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

namespace gang::base {

std::string user_name(unsigned uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) == 0 &&
      found != nullptr && pw.pw_name != nullptr && *pw.pw_name != '\0') {
    return std::string(pw.pw_name) + " (uid " + std::to_string(uid) + ")";
  }
  return "uid " + std::to_string(uid);
}


namespace {
// strerror_r is the XSI (int) or the GNU (char*) variant depending on the
// feature macros; overloads accept either.
[[maybe_unused]] const char* strerror_result(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}
[[maybe_unused]] const char* strerror_result(const char* text, const char*) {
  return text;
}
}  // namespace

std::string errno_text(int err) {
  char buf[256] = {};
  return strerror_result(strerror_r(err, buf, sizeof buf), buf);
}

std::string host_port(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string local_time_text() {
  timeval tv;
  ::gettimeofday(&tv, nullptr);
  tm local;
  ::localtime_r(&tv.tv_sec, &local);
  char when[32];
  const size_t n = std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &local);
  std::snprintf(when + n, sizeof when - n, ".%03d",
                static_cast<int>(tv.tv_usec / 1000));
  return when;
}

}  // namespace gang::base
