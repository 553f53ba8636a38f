// Whether this process ran out of file descriptors: a failure to open a
// socket, told apart from a lost peer by the process's own count, so the
// error can say what ran out and how to get more.
#pragma once

#include <string>

namespace gang::base {

// True when this process holds (nearly) as many descriptors as its limit
// (RLIMIT_NOFILE) allows; *why (may be null) then says how many of how many,
// and how to raise the limit.
bool out_of_descriptors(std::string* why);

}  // namespace gang::base
