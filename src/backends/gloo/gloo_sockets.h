// Finding and shutting down the TCP connections of one Gloo context.
//
// Gloo has no public call that fails the operations waiting on a context,
// but its pairs fail them when their connection breaks. So abort shuts down
// the context's own sockets. They are told apart from every other socket of
// the process (other gangs share the device, and a port number can be reused
// by a later pair) by recording, when the context connects, which sockets
// are new and bound to one of its pairs' published addresses.
#pragma once

#include <sys/types.h>

#include <gloo/context.h>

#include <vector>

namespace gang::backends::gloo_impl {

// The inode of every socket this process has open.
std::vector<ino_t> socket_inodes();

// The sockets of ctx's pairs that were not open in `before` (taken just
// before ctx connected).
std::vector<ino_t> context_sockets(::gloo::Context& ctx,
                                   const std::vector<ino_t>& before);

// shutdown(2)s every open socket whose inode is listed.
void shutdown_sockets(const std::vector<ino_t>& inodes);

}  // namespace gang::backends::gloo_impl
