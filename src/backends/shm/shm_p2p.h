// Sends and receives of the shm backend, matched by (peer, tag) and posted
// the moment they are issued.
//
// Every ordered pair of ranks has a mailbox per channel (data, control) in
// the segment: a ring of message headers the sender posts (tag, size, id)
// and a data ring. A receive claims the oldest posted message of its tag;
// the sender then streams that message's bytes through the data ring while
// the receiver drains it. One message streams per mailbox at a time; others
// wait in the header ring, so messages of other tags can be received in any
// order, and equal tags match in issue order. At most kRing (256) sends to
// one peer wait unreceived at once; later ones post as earlier ones are
// taken (so a receiver waiting for the 257th message before taking any of
// the first 256 would wait forever). Progress is made by whoever
// tests or waits on any send or receive of this rank (the contract of a
// blocking send: it may wait for the peer's receive).
#pragma once

#include <cstdint>
#include <memory>

#include "backends/shm/shm_segment.h"
#include "backends/shm/shm_wait.h"
#include "core/backend.h"

namespace gang::backends::shm_impl {

class P2PEngine;

// Posts a send or receive; the work completes it. `engine` outlives nothing:
// works keep it alive.
core::BackendWorkPtr post_p2p(const std::shared_ptr<P2PEngine>& engine,
                              const core::Operation& op);

std::shared_ptr<P2PEngine> make_p2p_engine(std::shared_ptr<Segment> segment,
                                           std::shared_ptr<Waiter> waiter,
                                           int rank);

}  // namespace gang::backends::shm_impl
