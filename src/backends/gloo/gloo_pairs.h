// Connections between a Gloo gang's ranks that a stranger cannot take.
//
// A Gloo TCP pair listens on a port of its own and, left alone, takes the
// first connection that arrives there, whoever makes it. The pairs made here
// take only a connection that proves it knows the gang's secret: the
// connecting rank sends
//     HMAC-SHA-256(secret, "gang gloo pair v1 <its rank> <listener's rank> "
//                          + the listener's published address)
// before anything else. The listening rank keeps accepting, reads each
// proof without blocking its event loop, closes every connection whose
// proof is wrong, cut short or crowded out (at most kCandidates wait at
// once; the oldest goes first), and adopts the first whose proof is right.
// A proof names both ranks and one listening address, so it opens no other
// pair, and a listening port serves one creation only.
//
// The connecting side trusts the address it read from the gang's store: the
// store is as private as the secret (a token-protected store keeps both to
// the job).
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <string>

namespace gang::store {
class Store;
}

namespace gang::backends::gloo_impl {

// Connects rank `rank` of `size` with every other rank: each rank publishes
// the listening addresses of its pairs under "<rank>" in `store` (already
// prefixed for this gang) and connects to the others' in rank order. Gloo
// exceptions (a peer that refused or never came) pass through; ends by
// `timeout`.
std::shared_ptr<::gloo::rendezvous::Context> connect_mesh(
    store::Store& store, std::shared_ptr<::gloo::transport::Device> device,
    int rank, int size, const std::string& secret,
    std::chrono::milliseconds timeout);

}  // namespace gang::backends::gloo_impl
