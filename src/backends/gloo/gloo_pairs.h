// Connections between a Gloo gang's ranks: made on first use, and only
// with the gang's secret.
//
// Every rank listens on one port for its gang and publishes that address
// once; rank 0 gathers the addresses and publishes the list, so creating a
// gang of N ranks costs 2N + 1 store operations and no connection at all.
// The pair of two ranks is connected when one of them first talks to the
// other (Gloo asks the context for it): the lower rank connects to the
// higher one's port, the higher one waits for it. A waiting rank only ever
// waits for a lower one, which never waits to connect, so ranks that run the
// same operations never wait for each other in a circle.
//
// The connecting rank sends its rank (4 bytes, big-endian) and
//     HMAC-SHA-256(secret, "gang gloo pair v2 <its rank> <listener's rank> "
//                          + the listener's published address)
// before anything else. The listening rank reads each proof without
// blocking its event loop, closes every connection whose proof is wrong,
// cut short, late (kProofWithin) or crowded out (at most kCandidates wait at
// once; the oldest goes first), or that names a rank already connected, and
// makes the pair of the first right one. A proof names both ranks and one
// listening address, so it opens no other pair, and a listening port
// serves one gang only.
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
#include <vector>

namespace gang::store {
class Store;
}

namespace gang::backends::gloo_impl {

// The context of rank `rank` of `size`: publishes its listening address
// under "<rank>" in `store` (already prefixed for this gang), rank 0 the
// list of all under "all", and returns a Gloo context whose pairs connect
// on first use. Waits for the list until `timeout`; a pair's connection
// waits up to `pair_timeout`. Gloo exceptions (a peer that refused or
// never came) pass through.
std::shared_ptr<::gloo::rendezvous::Context> connect_mesh(
    store::Store& store, std::shared_ptr<::gloo::transport::Device> device,
    int rank, int size, const std::string& secret,
    std::chrono::milliseconds timeout, std::chrono::milliseconds pair_timeout);

// Closes every pair connected so far (no linger: the peers' operations with
// this rank fail) and the listening port, and ends every wait for a
// connection; later connections are refused. From any thread.
void close_mesh(::gloo::rendezvous::Context& context) noexcept;

// The peers whose connection with this rank failed (closed by the peer, or
// broken), in rank order; the ones whose pair is busy are not looked at.
std::vector<int> broken_peers(::gloo::Context& context);

}  // namespace gang::backends::gloo_impl
