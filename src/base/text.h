// Text that several layers format the same way.
#pragma once

#include <string>

namespace gang::base {

// strerror(err), thread-safe.
std::string errno_text(int err);

// "host:port", with an IPv6 host in brackets ("[::1]:29500").
std::string host_port(const std::string& host, int port);

}  // namespace gang::base
