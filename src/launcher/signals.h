// The signals gangrun handles, read from a signalfd so its poll loop sees
// them as just another descriptor.
#pragma once

#include <signal.h>

#include <vector>

#include "base/unique_fd.h"

namespace gang::launcher {

class SignalFd {
 public:
  // Blocks SIGINT, SIGTERM, SIGCHLD, SIGUSR2 and SIGPIPE (so a closed stdout is an
  // EPIPE, not a death), plus SIGHUP and SIGQUIT unless they were ignored
  // (nohup), in this thread and every thread started later. Call it before
  // any thread starts. SIGINT and SIGTERM are handled even when gangrun was
  // started with them ignored (a background job of a script).
  SignalFd();
  // Unblocks them again.
  ~SignalFd();

  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  int fd() const { return fd_.get(); }

  // The signals that arrived since the last call, without waiting.
  std::vector<int> drain();

  // Waits up to timeout_ms for a terminating signal (not SIGCHLD or
  // SIGUSR2); returns it or 0.
  int wait_terminating(int timeout_ms);

  // The mask a child must start from: nothing blocked. Safe to use between
  // fork and exec.
  static const sigset_t& empty_mask();

 private:
  sigset_t old_mask_;
  base::UniqueFd fd_;
};

}  // namespace gang::launcher
