// Gangs whose ranks span hosts with several ranks on some: collectives in
// two levels, as NCCL does with NVLink and the network. The ranks of each
// host form a local gang on a backend that serves one host (shared memory);
// the first rank of each host is its leader, and the leaders form a gang on
// a backend that spans hosts. All-reduce, broadcast, all-gather and the
// barrier run within each host, among the leaders, and within each host
// again (a large all-reduce in chunks, the leaders' exchange of one beside
// the host's steps on the others); every other operation (and every group) runs on a flat gang of all
// ranks on the wide backend, whose connections are made only when used.
//
// The registry composes the two by their properties
// (BackendInfo::one_host_only) and never by name (core::choose); this
// backend registers the composer and knows no other backend.
#pragma once

#include "core/registry.h"

namespace gang::backends::two_level_impl {

using core::BackendInfo;

// A backend of two levels over `local` (serves one host) and `wide` (any
// gang). Named "<local>+<wide>". For a gang that turns out to be on one
// host (a split), it creates `local` alone; with one rank per host, `wide`
// alone.
BackendInfo two_level(const BackendInfo& local, const BackendInfo& wide);

}  // namespace gang::backends::two_level_impl
