// Which machine this process runs on, as far as sharing memory goes.
#pragma once

#include <string>

namespace gang::topology {

// A string equal for exactly the processes that can share memory with this
// one: the host name, the kernel's boot id, and the network and IPC
// namespaces (two network namespaces stand in for two hosts in the tests,
// and they are treated as two hosts). Computed once per process;
// GANG_HOST_ID, when set, is taken instead (ranks with equal values must be
// able to share memory: the tests play several hosts on one this way).
const std::string& host_id();

}  // namespace gang::topology
