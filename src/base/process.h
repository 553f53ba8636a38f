// Whether a process has ended, as its peers on the same host see it.
#pragma once

#include <sys/types.h>

namespace gang::base {

// True once process `pid` has exited, whether or not its parent has reaped
// it yet: a zombie has ended. A process that exists and has not exited
// (running, sleeping, stopped) has not. kill(pid, 0) alone cannot tell, as
// a zombie still answers it; the state in /proc/<pid>/stat can.
bool process_ended(pid_t pid);

}  // namespace gang::base
