// The TCP device a Gloo gang talks through, on the interface that reaches
// the rendezvous host.
#pragma once

#include <gloo/transport/device.h>

#include <memory>
#include <string>

namespace gang::backends::gloo_impl {

// GANG_SOCKET_IFNAME if set; otherwise the local address the kernel would
// use to reach `store_host` (when that host is loopback, its own address:
// 127.0.0.1, or another of 127/8); for stores without a host, the first
// non-loopback interface, else loopback. The gangs of a process that
// listen at one place share its device, and so its event loop.
std::shared_ptr<::gloo::transport::Device> make_device(
    const std::string& store_host);

// The address make_device binds to when no interface is named (exposed for
// tests and logs).
std::string local_address_toward(const std::string& host);

}  // namespace gang::backends::gloo_impl
