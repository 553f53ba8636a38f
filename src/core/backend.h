// The Backend interface (v2): what a transport must do for a gang. The core
// validates every argument before calling it, orders collectives, applies
// deadlines and keeps the failed state; a backend only moves and reduces
// data.
//
// Backends *post* operations and hand back a BackendWork. A synchronous
// backend (Gloo's collectives, the fake gang) runs the operation inside
// post() and hands back nothing (a null BackendWorkPtr: already finished),
// so the blocking hot path stays on the caller's thread with no hand-off and
// no allocation. An asynchronous backend (Gloo's point-to-point, a device
// backend) returns a work that the core tests or waits for later.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "core/collective.h"
#include "core/types.h"

namespace gang::store {
class Store;
}

namespace gang::core {

using base::Clock;
using base::deadline_after;
using base::Millis;

// What a backend can do, read by the core instead of asking for a backend
// by name.
struct Capabilities {
  // Buffers are host memory. The core then runs its own control traffic
  // (byte payloads, split bookkeeping, fingerprints, barriers) over this
  // backend; otherwise it opens a host backend of its own beside it.
  bool host_memory = true;
  // One process stands in for every rank (the fake gang): no peers, so
  // point-to-point and splitting by color are meaningless.
  bool emulates_peers = false;
  // Sends and receives are matched by (peer, tag) and may be posted the
  // moment they are issued, independently of collectives in flight. Without
  // it point-to-point operations are posted in issue order with everything
  // else (stream-ordered device backends; tag 0 only).
  bool tagged_p2p = true;
  // Receives from any peer (kAnySource) are matched as MPI matches them.
  bool any_source = false;
  // Operations are enqueued on a device stream (Operation::stream).
  bool stream_ordered = false;
  // Backend::split may make a sub-gang's backend from this one (it may
  // still answer kUnsupported).
  bool native_split = false;
  // The backend's waits warn every GANG_WAIT_WARN_S themselves, naming the
  // ranks they wait for; the core's watchdog then says nothing.
  bool warns_while_waiting = false;
  // The backend reads or writes its store (BackendConfig::store) after its
  // creation returned. Without it, the keys it wrote there are forgotten
  // once every rank has made its backend, so a long job's store holds no
  // history of its gangs' rendezvous.
  bool uses_store_later = true;
};

// Which tag space an operation travels in: the user's collectives, the
// debug fingerprint of collective `seq`, or the core's control traffic.
// A backend keeps the three apart on the wire.
enum class Channel : uint8_t { kData, kFingerprint, kControl };

// One validated operation as a backend receives it.
struct Operation {
  CollectiveArgs args;
  // The number of this collective in its channel, the same on every rank;
  // 0 for point-to-point (which only two ranks see).
  uint64_t seq = 0;
  Channel channel = Channel::kData;
  // Every wait of the operation ends by then.
  Clock::time_point deadline;
  // The gang's device stream (opaque): the user's, kLegacyStream for the
  // legacy default one, or null when the gang set none (the backend's own;
  // always null for host backends).
  void* stream = nullptr;
  // Device backends: a wait of the operation's work orders the caller's
  // stream after it and returns, without waiting on the host for the
  // device (gang_set_cuda_completion's GANG_CUDA_COMPLETION_STREAM).
  bool stream_completion = false;
};

// Operation::stream for CUDA's legacy default stream (the value of
// cudaStreamLegacy; GANG_BACKEND_LEGACY_STREAM for modules).
inline void* const kLegacyStream = reinterpret_cast<void*>(0x1);

class BackendWork {
 public:
  virtual ~BackendWork() = default;
  // True once the operation has ended. Never blocks for long.
  // Throws gang::Error if the operation failed.
  virtual bool test() = 0;
  // Waits until the operation ends or `until`, whichever is first; true if
  // it ended. Throws gang::Error if it failed (kTimeout at its deadline).
  virtual bool wait(Clock::time_point until) = 0;
};

// Null: the operation finished inside post().
using BackendWorkPtr = std::unique_ptr<BackendWork>;

class Backend;

// How the core hands operations to a backend of a gang of `size` ranks. A
// gang of one rank on host memory has nobody to meet: its collectives are
// computed here (run_local), once for every backend, and never reach it.
// Inline (below Backend): it is on every operation's path.
inline BackendWorkPtr post_to(Backend& backend, const Operation& op, int size);
BackendWorkPtr post_group_to(Backend& backend, const std::vector<Operation>& ops, int size);

class Backend;

struct BackendConfig {
  // The gang's name, for messages and logs.
  std::string name;
  int rank = 0;
  int size = 1;
  // Where this rank sits: -1 where unknown.
  int local_rank = -1;
  int local_size = -1;
  // Identifies the machine (and its namespaces): ranks with equal host ids
  // can share memory.
  std::string host_id;
  // Per rank of this gang, the number of its host (equal numbers: equal
  // host ids), known after rendezvous; empty when size is 1.
  std::vector<int> host_of;
  DeviceType device_type = DeviceType::kCpu;
  int device_index = -1;
  // Rendezvous for this gang only (already prefixed); null when size is 1.
  std::shared_ptr<store::Store> store;
  Millis timeout{600000};
  // Bytes only this gang's ranks know (and whoever may read the store): a
  // root gang's are drawn by its rank 0 at rendezvous, a split's derived
  // from its parent's. A backend authenticates its connections with them.
  // Empty when size is 1.
  std::string secret;
  // Creating the backend (connecting, exchanging addresses) must end by
  // then: the rest of gang_create's timeout.
  Clock::time_point deadline = Clock::time_point::max();
  // A split: the backend of the parent gang (of the same kind) and this
  // rank's color and key in it (gang_split's; a subgang's are 0 and its
  // position). A backend may share resources with the parent or split it
  // natively; it may also ignore all three and use the store. Null / -1
  // for a gang made by gang_create.
  Backend* parent = nullptr;
  int color = -1;
  int key = 0;
  // Keys the backend reads after its creation, one a rank: rank r sets
  // only "<r>" here, and the core forgets each rank's key as it forgets
  // the rank's record of itself (its own when its gang ends well, every
  // rank's when the gang shrinks), not once the gang met. Null without a
  // store.
  std::shared_ptr<store::Store> lasting_store;
  // The gang serves only what a composite's own levels do not (the flat
  // gang beside two levels): its ranks talk seldom, and to few peers, so a
  // backend may set each peer up on first contact, reading what it needs
  // from lasting_store then, instead of handing every rank everybody's at
  // creation.
  bool seldom_used = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  virtual const Capabilities& capabilities() const = 0;

  // The device ordinal the backend runs on as it resolved it (a device
  // backend asked for -1 picks one); -1 if it does not say.
  virtual int device_index() const { return -1; }

  // Whether op over dtype can be reduced. Called before issue.
  virtual bool supports(ReduceOp op, DType dtype) const = 0;

  // Posts one validated operation. Throws gang::Error: kTimeout, kPeerLost,
  // kAborted (after abort()), kSystem, kInternal.
  virtual BackendWorkPtr post(const Operation& op) = 0;

  // Posts a group: every operation starts before any is waited for, so
  // both sides of an exchange may send first; the work ends when all have.
  // The default posts each in order and gathers their works.
  virtual BackendWorkPtr post_group(const std::vector<Operation>& ops);

  // An error the backend noticed on its own (a device fault, a watchdog),
  // kOk if none; never blocks.
  virtual Status poll_error(std::string* /*message*/) { return Status::kOk; }

  // Orderly teardown once nothing is in flight: waits for what the backend
  // still owes its peers. Not called after abort().
  virtual void finalize() {}

  // A native split: the new gang's backend made from this one's state, on
  // every rank of this gang (config.color -1 on a rank that stays out,
  // which gets null), with nothing of this gang being posted meanwhile.
  // Throws kUnsupported where the backend has none (the default): gang then
  // creates the new backend on the members alone.
  virtual std::unique_ptr<Backend> split(const BackendConfig& config);

  // Makes everything in flight, on any thread, end promptly with kAborted,
  // and tells the peers (their operations with this rank fail). Idempotent
  // and thread-safe.
  virtual void abort() noexcept = 0;
};

// Many works as one: test() and wait() cover them all.
class CompositeWork final : public BackendWork {
 public:
  void add(BackendWorkPtr work) {
    if (work) parts_.push_back(std::move(work));
  }
  bool empty() const { return parts_.empty(); }
  bool test() override;
  bool wait(Clock::time_point until) override;
  // Null when nothing is left to wait for.
  static BackendWorkPtr simplify(std::unique_ptr<CompositeWork> w);

 private:
  std::vector<BackendWorkPtr> parts_;
  size_t done_ = 0;  // parts_[0, done_) have ended
};

// A gang of one on host memory: run_local (core/local_collective.h).
void post_alone(const Operation& op);

inline BackendWorkPtr post_to(Backend& backend, const Operation& op, int size) {
  if (size != 1 || !backend.capabilities().host_memory) return backend.post(op);
  post_alone(op);
  return nullptr;
}

}  // namespace gang::core
