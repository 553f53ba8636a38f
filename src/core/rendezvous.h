// Which store a root gang rendezvouses through when the caller gave none.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/env_detect.h"

namespace gang::store {
class Store;
}

namespace gang::core {

// Opens the rendezvous store of rank `rank` of a new root gang of `size` > 1,
// from the first of:
//   1. init_method (options.init_method), as is;
//   2. GANG_INIT_METHOD, as is;
//   3. the launch environment (`launch`, or env::detect() when null):
//      under torchrun with TORCHELASTIC_USE_AGENT_STORE=True the agent's
//      TCPStore, "torch://MASTER_ADDR:MASTER_PORT", on every rank; otherwise
//      "tcp://master_addr:master_port".
// A tcp:// rendezvous is served by rank 0 unless another process already
// serves its port (a launcher such as gangrun, which exports
// GANG_INIT_METHOD): then rank 0 is a client like the others. Errors name
// the address and the variables it came from; a store that does not answer
// as the expected kind of store is kStore.
std::shared_ptr<store::Store> open_rendezvous(const std::string& init_method,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout,
                                              const env::Launch* launch);

// One creation's place in the store and the secret its ranks share.
struct Generation {
  std::string prefix;  // "gang/<name>/<generation>/"
  std::string secret;  // kSecretBytes random bytes drawn by rank 0
  // Per rank, the index of its host (hosts numbered in order of their
  // lowest rank), so hosts() == 1 for a gang of one host.
  std::vector<int> host_of;
  int hosts() const;
};

constexpr size_t kSecretBytes = 32;

// A creation that lost rank `rank` before it met: its `lost` check (below)
// said so. Status kPeerLost; the rank is a fact for callers that retry
// without it (gang_grow, when the lost rank is a joiner).
class CreationLost : public Error {
 public:
  CreationLost(int rank, const std::string& message)
      : Error(Status::kPeerLost, message), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

// Agrees on a fresh generation for creating gang `name` of `size` ranks on
// `store`, and returns its key prefix and secret. The secret is as private
// as the store: rank 0 publishes it in the generation's go, so whoever may
// read the store may read it (a token-protected store keeps it to the
// job). Retryable by construction: rank 0 opens a new generation for every
// attempt (a counter) and publishes it; every other rank says hello to the
// generation it finds open, with the size it expects and a nonce of this
// attempt, and goes ahead only when rank 0's "go" for that generation
// carries its nonce's tag. A rank that meets a stale generation (a failed
// or abandoned attempt, or an earlier creation of the same name) never
// gets a go carrying its nonce, looks again and follows the newer one, so
// an immediate retry after a failed creation works, and so does a
// different size under the same name. Ranks that disagree on the size fail
// with kMismatch naming both. Every rank that joins adds 1 to
// "gang/<name>/joined". Every rank says its `host` (topology::host_id) in
// its hello; rank 0 numbers the hosts and puts every rank's host in the go
// beside the secret, so a rank reads one value of 4 bytes a rank and the
// host numbers (in runs of neighbours on one host). Every rank also says
// what it asks for (`asks`: the backend and device, one word); rank 0
// fails a creation whose ranks ask for different ones at once, with
// kMismatch naming both, on every rank.
// Throws kTimeout at `timeout`.
//
// With `lost`, rank 0 asks it about each rank whose hello it is waiting
// for, and every other rank about rank 0 while it waits for the go; a rank
// known failed ends the creation at once: rank 0 tells the others in its
// go, and every rank throws CreationLost naming that rank.
Generation join_generation(store::Store& store, const std::string& name,
                            int rank, int size, const std::string& host,
                            const std::string& asks,
                            std::chrono::milliseconds timeout,
                            const std::function<bool(int, std::string*)>& lost = {});

}  // namespace gang::core
