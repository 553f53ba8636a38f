// The failed state of a gang: healthy until its first error, which it then
// keeps for the messages of every later call. Failing is one-way and the
// first error wins: an abort, an overdue wait, an operation's error, a
// peer's notice, or the news that the survivors of a shrink went on without
// this rank (exclude), which from then on is what every call says.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "base/error.h"
#include "core/attribution.h"

namespace gang::core {

// What failing does besides the state, given by the gang.
struct FailureHooks {
  // Posts this rank's own failure where its peers watch (a notice board).
  std::function<void(const std::string& message)> post_notice;
  // Makes in-flight work end promptly: closes the transport, which both
  // unblocks this rank and tells the peers.
  std::function<void(const std::string& message)> abort;
  // Looks whether the survivors of a shrink went on without this rank, and
  // excludes it if so (Membership::note_fence).
  std::function<void()> note_fence;
};

class FailureState {
 public:
  // Rank `rank` of gang `gang`; `debug`: whether the gang compares every
  // collective across ranks (GANG_DEBUG=detail), which a timeout's message
  // otherwise suggests.
  FailureState(std::string gang, int rank, bool debug, Attribution attribution,
               FailureHooks hooks);
  FailureState(const FailureState&) = delete;
  FailureState& operator=(const FailureState&) = delete;

  bool failed() const { return failed_.load() != 0; }
  // kOk while healthy, else the status of the first error.
  Status status() const { return static_cast<Status>(failed_.load()); }

  // Records the first error (later ones are ignored) and aborts the gang's
  // work. A failure of this rank's own (not a peer's notice) is posted for
  // the peers and recorded for attribution first.
  void mark(Status status, const std::string& message, bool from_peer = false);
  // The survivors of a shrink went on without this rank, as `why` says:
  // fails the gang if healthy, and every call says `why` from now on.
  void exclude(const std::string& why);
  // Whether exclude() was called; *why (may be null) gets what it said.
  bool excluded(std::string* why = nullptr) const;

  // "<api>: gang "<name>" failed earlier: <first error>".
  std::string earlier(const char* api) const;
  // Throws kAborted with earlier(api), once it looked for a fence.
  [[noreturn]] void throw_failed(const char* api);

  // For Work: the message of operation `op` ("<api> (operation <id>) on
  // gang "<name>"") that failed with `what`, after failing the gang with
  // it and naming the first failure behind it. *status becomes the gang's
  // first error when an earlier failure (an abort, an overdue wait, an
  // exclusion) is why this operation failed. `ending` is called with the
  // final status before the gang fails.
  std::string report(const std::string& op, Status* status,
                     const std::string& what,
                     const std::function<void(Status)>& ending);
  // For Work: an operation outlived its deadline (`why`); fails the gang,
  // returns the message.
  std::string overdue(const std::string& why);

 private:
  const std::string gang_;
  const int rank_;
  const bool debug_;
  const Attribution attribution_;
  const FailureHooks hooks_;

  std::atomic<int> failed_{0};
  mutable std::mutex mu_;
  std::string failure_;
  bool excluded_ = false;
};

}  // namespace gang::core
