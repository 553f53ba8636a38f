// The core's own host channel. Byte payloads, split bookkeeping, debug
// fingerprints and the creation barrier are collectives of the core, not of
// the user: they travel here, in their own tag space, never through a
// device backend. When the gang's backend takes host memory the channel
// runs over it (Channel::kControl keeps the traffic apart); otherwise the
// channel owns a host backend of its own, made beside the device one.
//
// Every call is blocking, runs on the caller's thread and throws
// gang::Error; the gang turns errors into its failed state.
//
// Failure notices. A device backend's peers may be blocked on the device,
// where nothing from this channel reaches them, and its transport may stay
// up after this rank failed. So a gang with a channel of its own also has a
// notice board: one key in the gang's store ("failed") that a failing rank
// writes, as torch's ProcessGroupNCCL signals through its store. Beside it,
// the failing rank counts its notice in one key of the job's store (the
// store the gang was made from, shared by the job's gangs through their
// prefixes), which is all the process's watcher reads until it moves
// (notice_watcher.h): idle gangs cost the store one read per process and
// look, not one per gang.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace gang::store {
class Store;
}

namespace gang::core {

class ControlChannel {
 public:
  // Over `host`, which outlives the channel, for a gang of `size` ranks.
  ControlChannel(Backend* host, int size) : host_(host), size_(size) {}
  // Over a host backend of its own.
  ControlChannel(std::unique_ptr<Backend> own, int size)
      : own_(std::move(own)), host_(own_.get()), size_(size) {}

  Backend& backend() { return *host_; }
  bool owns_backend() const { return own_ != nullptr; }

  void barrier(Clock::time_point deadline);
  // Every rank's `mine`, in rank order.
  std::vector<uint64_t> all_gather_words(uint64_t mine, int size,
                                         Clock::time_point deadline);
  // `count` elements of dtype per rank, gathered in rank order.
  void all_gather(const void* send, void* recv, size_t count, DType dtype,
                  Clock::time_point deadline);
  void all_gatherv(const void* send, size_t send_count, void* recv,
                   std::vector<size_t> recv_counts, Clock::time_point deadline);
  void broadcast(void* buf, size_t count, DType dtype, int root,
                 Clock::time_point deadline);
  void send(const void* buf, size_t bytes, int peer, int tag,
            Clock::time_point deadline);
  void recv(void* buf, size_t bytes, int peer, int tag,
            Clock::time_point deadline);
  // The debug fingerprint of data collective `seq`: `words` 64-bit words
  // per rank, gathered in rank order in their own tag space.
  void fingerprint(const uint64_t* mine, uint64_t* all, size_t words,
                   uint64_t seq, Clock::time_point deadline);

  // Aborts an owned backend (a borrowed one is the gang's to abort).
  void abort() noexcept;

  // The notice board: `board` is the gang's store under its prefix, `job`
  // the store it was made from, where the job's failures are counted (the
  // count is made here if missing, one request, so that reading it never
  // waits). Without them (a gang of one) there is nothing to tell.
  void set_notice_board(std::shared_ptr<store::Store> board,
                        std::shared_ptr<store::Store> job);
  bool has_notice_board() const { return board_ != nullptr; }
  // Tells every rank that this one failed, and why. Best effort and at
  // once: a thread of its own writes the notice (the store may be slow or
  // gone) and then counts it in the job's store, holding the stores, not
  // the channel, so it may outlive the gang.
  void post_failure(const std::string& message) noexcept;
  // A notice some rank posted: true and its text. Waits at most a few
  // milliseconds for the store; never throws (an unreachable store is no
  // notice: the operations themselves will fail).
  bool peer_failure(std::string* message) noexcept;
  // The notices posted so far in the job whose store is `job`, as the store
  // holds the count (compared, never parsed): true and the count, false
  // when the store does not answer within a few milliseconds. Never throws.
  static bool failures_posted(store::Store& job, std::string* count) noexcept;

 private:
  void run(Operation op);

  std::unique_ptr<Backend> own_;
  Backend* host_;
  int size_;
  // Control collectives issued so far: the same on every rank, since every
  // rank makes the core's calls in the same order.
  std::atomic<uint64_t> seq_{1};
  std::shared_ptr<store::Store> board_;
  std::shared_ptr<store::Store> job_;
};

}  // namespace gang::core
