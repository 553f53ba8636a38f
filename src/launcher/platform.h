// The small platform helper gangrun needs: error text, whole writes, free
// ports, signal names, program lookup and directories. POSIX and Linux only.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include "base/text.h"

namespace gang::launcher {

using Clock = std::chrono::steady_clock;

// A failure gangrun reports as "gangrun: <message>" and exits 1 for.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using base::errno_text;

// Writes all n bytes to fd, retrying on EINTR and waiting out EAGAIN.
// Returns false on any other error (a closed pipe, a full disk).
bool write_all(int fd, const char* data, size_t n);

// A TCP port no socket is bound to right now (the kernel's choice for
// port 0 on every IPv4 interface). Nothing is left bound to it.
int pick_free_port();

// "SIGKILL" for 9; "SIG<n>" for a number without a name.
std::string signal_name(int sig);

// The path execve should run for `program`: itself when it contains a '/',
// else the first executable match on PATH. Throws LaunchError if none.
std::string find_program(const std::string& program);

// Milliseconds from now until t, rounded up and clamped to [0, INT_MAX] so
// poll() never wakes before t and spins.
int millis_until(Clock::time_point t);

}  // namespace gang::launcher
