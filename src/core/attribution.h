// Naming the cause of a failure. A rank's own view of a failure is often
// second-hand: when rank 3 dies in a ring, rank 2 loses its connection to
// it, fails and closes its own connections, and rank 1 then reads only
// that rank 2 went away. So every rank that fails records its failure in
// the gang's store before it closes its transport: <prefix>failures counts
// them and failure/<i> holds "<rank> <message>" of the i-th. A rank that
// reports a failure reads the first record, written by the rank nearest
// the cause, and names it.
//
// Device gangs have their notice board for this (control_channel.h); the
// records are for gangs whose control channel is their own backend. The
// store is asked only on the way to failing, never on the way of an
// operation that succeeds, and never for long: a thread of its own talks to
// it, and the failing rank waits for that thread only briefly (the store
// may be slow, gone, or busy with another thread's wait), so closing the
// transport, which is what tells the peers, is never held up for long.
#pragma once

#include <memory>
#include <string>

namespace gang::store {
class Store;
}

namespace gang::core {

class Attribution {
 public:
  // Records nothing and names nothing (a gang without a store, of one
  // rank, or with a notice board).
  Attribution() = default;
  // Rank `rank` of a gang of `size` whose records are under `prefix` in
  // `store`.
  Attribution(std::shared_ptr<store::Store> store, std::string prefix,
              int rank, int size);

  bool records() const { return store_ != nullptr && size_ > 1; }
  // Records this rank's own failure, before its transport closes.
  void record(const std::string& message) const noexcept;
  // The first failure recorded, worded to follow a message ("" when that is
  // this rank's own, or `mine` already says it, or there is none to read).
  std::string first(const std::string& mine) const noexcept;
  // After a timeout: the ranks that recorded no failure of their own once
  // the others' records stopped coming ("" when all did, or none can tell).
  std::string silent() const noexcept;

 private:
  std::shared_ptr<store::Store> store_;
  std::string prefix_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace gang::core
