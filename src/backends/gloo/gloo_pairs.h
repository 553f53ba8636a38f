// Connections between a Gloo gang's ranks: made on first use, and only
// with the gang's secret.
//
// The seam with Gloo's internals: GangPair and the Listener (gloo_pairs.cc)
// derive from gloo::transport::tcp::Pair, close the listening socket Pair
// opens and adopt or make their own connection; MeshPairs derives from
// tcp::Context to hand Gloo those pairs; a view's buffers and transport
// (gloo_view.cc) derive from tcp::UnboundBuffer and tcp::Context; a receive
// from any rank registers with MeshPairs through tcp::Context's
// recvFromAnyFindRank and tcp::Pair::tryRecv (Gloo's own recvFromAny reads
// the base class's pair table, which a mesh leaves empty). That
// reaches into what Gloo does not promise (the pair's state_, fd_, self_,
// device_ and lock; the device's descriptor table; the layout of
// compat/gloo/common/memory.h where Debian lacks the header). It stays in
// those two files; a run-time check stops at the first pair if the headers
// and the library disagree, and unit.gloo_seam fails when the installed
// Gloo headers are not the ones they were checked against
// (tests/unit/gloo_seam.sha256).
//
// Every rank listens on one port for its gang and publishes that address
// once; rank 0 gathers the addresses and publishes the list, so creating a
// gang of N ranks costs 2N + 1 store operations and no connection at all.
// A gang that talks to few of its peers, and seldom (the flat gang beside
// two levels), skips the list: a rank reads a peer's address from the
// store when it first connects to it, N - 1 operations at creation.
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
//
// One mesh may serve a gang and every gang split from it (gloo_view.h): a
// process then holds one connection with each process of its lineage,
// however many sub-gangs they share. A gang that fails closes the
// connections it was using (fence), which both ends the waits of its
// transfers that can never complete and keeps a late message of its own
// from landing in a buffer it gave up; the next use connects again (on a
// mesh that only ever served one gang, a closed connection stays closed,
// and fails that gang). Each connection of a pair of ranks has a
// generation, counted by both ends and named in the proof (so an old proof
// opens nothing): the listening rank takes a
// connection of a newer generation in place of the one it holds, and a
// fence closes only the generation the failed gang used, never a newer one
// that another gang has already made.
#pragma once

#include <gloo/common/error.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gang::store {
class Store;
}

namespace gang::backends::gloo_impl {

// A connection made on first use that did not come within the gang's
// timeout. Thrown through Gloo's calls as its own exception type, so the
// backend tells a timeout from a lost peer by the type, not by the words.
class ConnectTimeout : public ::gloo::IoException {
 public:
  using ::gloo::IoException::IoException;
};

// A transfer buffer that a connection can fail. Gloo lets only its own
// pair fail a buffer, and a pair of Gloo's that fails tells the transfers
// it holds but for sends queued behind others, whose waits would then
// last to their deadlines (the rank a failed peer was sending to hung so,
// one run in twelve, in multiproc.divergence). The gang's pairs
// (gloo_pairs.cc) fail those sends as they fail; every buffer of a view
// (gloo_view.cc) is one of these.
class FailableBuffer : public ::gloo::transport::tcp::UnboundBuffer {
 public:
  using ::gloo::transport::tcp::UnboundBuffer::UnboundBuffer;
  void fail(std::exception_ptr ex) { signalException(std::move(ex)); }
};

// The connections of this rank with the other ranks of a root gang (its
// "mesh ranks"), shared by the gangs split from it.
class Mesh {
 public:
  virtual ~Mesh() = default;
  virtual int mesh_rank() const = 0;
  virtual int mesh_size() const = 0;
  // The connection with mesh rank `peer`, made on first use (or again after
  // a fence); *generation says which connection of the two ranks it is.
  // Throws a Gloo exception when it cannot be made.
  virtual std::unique_ptr<::gloo::transport::Pair>& pair(int peer, uint32_t* generation) = 0;
  // Closes connection `generation` with `peer` if it is still open (no
  // linger: the peer's operations on it fail). From any thread but Gloo's.
  virtual void fence(int peer, uint32_t generation) noexcept = 0;
  // Closes every connection and the listening port; later connections are
  // refused, and waits for one end. From any thread but Gloo's.
  virtual void close() noexcept = 0;
  // Whether the current connection with `peer` failed (fenced, closed by
  // the peer, or broken), as far as a look without waiting can tell; such a
  // connection is made again on its next use.
  virtual bool broken(int peer) = 0;
  // Registers `buf` for a receive on `slot` from whichever of the mesh
  // ranks `from` sends first (Gloo's receive from any rank, which the
  // pairs look up in the mesh's context, not in a view's).
  virtual void recv_from_any(::gloo::transport::tcp::UnboundBuffer* buf, uint64_t slot,
                             size_t offset, size_t nbytes, std::vector<int> from) = 0;
  // The gangs that use this mesh now, and whether it ever served more than
  // one (gloo_view.h counts them).
  std::atomic<int> gangs{0};
  std::atomic<bool> shared{false};
  // The store the root gang met in: where the gangs of this mesh count
  // their slot spaces (gloo_view.h).
  virtual store::Store& store() = 0;
  // Whether it reads its peers' addresses on first use, from a store that
  // holds them only as long as the gang that made the mesh lives: such a
  // mesh is not shared with gangs split from it.
  virtual bool reads_on_first_use() const = 0;
};

// The mesh of rank `rank` of `size`: publishes its listening address under
// "<rank>" in `store` (already prefixed for this gang), and rank 0 the
// list of all under "all", for which the others wait until `timeout`. With
// `on_first_use`, the address goes there instead (rank 0's not at all), no
// list is made, and a rank reads a peer's address from it when it first
// connects to that peer: that store must hold it as long as the mesh may
// connect. A connection waits up to `pair_timeout`. Gloo exceptions (a
// peer that refused or never came, an address the store did not give)
// pass through. The mesh keeps `store` for the gangs split later.
std::shared_ptr<Mesh> connect_mesh(std::shared_ptr<store::Store> store,
                                   std::shared_ptr<::gloo::transport::Device> device,
                                   int rank, int size, const std::string& secret,
                                   std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds pair_timeout,
                                   std::shared_ptr<store::Store> on_first_use);

}  // namespace gang::backends::gloo_impl
