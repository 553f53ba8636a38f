// One rank's process: spawned in its own process group with its output on
// pipes, dying with gangrun (PR_SET_PDEATHSIG), killed and reaped by the
// destructor if it is still running.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace gang::launcher {

// How a process ended.
struct ExitStatus {
  bool signaled = false;
  int value = 0;  // exit code, or the signal number
  bool core_dumped = false;

  static ExitStatus from_wait(int wstatus);
  bool success() const { return !signaled && value == 0; }
  // The shell's convention: the exit code, or 128 + the signal.
  int exit_code() const { return signaled ? 128 + value : value; }
  // "exited with status 3", "killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

struct SpawnSpec {
  std::string path;               // what execve runs
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // "NAME=value"
  int stdin_fd = -1;              // dup'ed to the child's stdin
};

class Child {
 public:
  // Forks and execs; returns once the program runs. The child's stdout and
  // stderr are the write ends of two pipes whose read ends (non-blocking,
  // close-on-exec) land in *out and *err. Throws LaunchError, e.g. when
  // execve fails, with its reason.
  static Child spawn(const SpawnSpec& spec, base::UniqueFd* out,
                     base::UniqueFd* err);

  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // A child still running is sent SIGKILL (its whole group) and reaped.
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !reaped_; }
  const ExitStatus& status() const { return status_; }

  // Sends sig to the child's process group (the rank and what it started).
  // No-op once reaped, so a recycled pid is never hit.
  void signal(int sig) const;

  // Reaps the child if it has ended; returns whether it did just now.
  bool try_reap();

 private:
  explicit Child(pid_t pid) : pid_(pid) {}
  void kill_and_reap();

  pid_t pid_ = -1;
  bool reaped_ = false;
  ExitStatus status_;
};

}  // namespace gang::launcher
