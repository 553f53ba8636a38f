// Text that several layers format the same way.
#pragma once

#include <string>

namespace gang::base {

// A user's name for messages: "root (uid 0)", or "uid 1234" when it has
// none.
std::string user_name(unsigned uid);

// strerror(err), thread-safe.
std::string errno_text(int err);

// "host:port", with an IPv6 host in brackets ("[::1]:29500").
std::string host_port(const std::string& host, int port);

// The local wall-clock time to the millisecond, "2026-11-24T18:32:57.741":
// what log lines and flight-recorder dumps are stamped with.
std::string local_time_text();

}  // namespace gang::base
