// Who is alive, for membership decisions (membership.cc): a rank that is
// alive is waited for; only a rank known to have failed is left out, the
// way ULFM's shrink agrees on the failed processes rather than on the
// punctual ones.
//
// Every process that holds a gang with a store keeps a heartbeat there: a
// thread of its own advances gang/alive/<token> (token: random, one per
// process) every quarter of the detection interval (GANG_FAILURE_DETECT_MS),
// for as long as the store lives. Every rank of such a gang records at its
// creation who it is: <gang prefix>who/<rank> = "<token> <scope> <pid>",
// where the scope names the kernel and PID namespace its pid means
// something in. A rank is known to have failed when
//   - its process has ended (zombies included) and this process shares its
//     scope, so can look (at once);
//   - a rank of its scope found it ended and marked it: <gang prefix>dead/<r>
//     (at once, for ranks on other hosts);
//   - its heartbeat stood still for the detection interval (a process that
//     is gone with its whole host, or stopped, or cut off).
// A rank that is merely slow (writing a checkpoint on its main thread) keeps
// beating and is waited for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "core/types.h"

namespace gang::store {
class Store;
}

namespace gang::core {

using base::Clock;
using base::Millis;

// This process's liveness record: "<token> <scope> <pid>".
std::string self_record();

// A liveness record read back.
struct Who {
  std::string token;  // its heartbeat: gang/alive/<token>
  std::string scope;  // the kernel and PID namespace its pid means something in
  int pid = 0;
};
// False when `text` is no record.
bool parse_who(const std::string& text, Who* who);
// The key of its heartbeat: gang/alive/<token>.
std::string beat_key(const Who& who);
// Whether the process `who` names is seen from here to have ended: it
// shares this process's scope, and has.
bool ended_here(const Who& who);

// Keeps this process's heartbeat in `store` while the store lives (a
// thread per store; the first call for a store starts it, others do
// nothing). Never throws.
void keep_beating(const std::shared_ptr<store::Store>& store);

// Records `rank` of the gang under `prefix` as this process (who/<rank>).
void publish_self(store::Store& store, const std::string& prefix, int rank);

// What the ranks of one gang are known to be, read from its store. Keeps
// the heartbeats it has seen, so one watch is asked again and again over a
// membership change. Not thread-safe.
class PeerWatch {
 public:
  PeerWatch(std::shared_ptr<store::Store> store, std::string prefix, int size);

  // Whether rank r is known to have failed; *why (may be null) says how it
  // is known. A rank that never recorded itself (an older peer) counts as
  // failed once it has been asked about for the detection interval.
  bool failed(int r, std::string* why = nullptr);

  // Takes `who` as rank r's record, for a rank that recorded itself
  // elsewhere (a joiner, in what it asked for).
  void know(int r, const Who& who);

  // Marks every rank of this process's scope whose process has ended.
  void mark_ended_neighbours();

 private:
  struct Peer {
    bool known = false;  // who/<r> read
    Who who;
    int64_t beat = -1;
    Clock::time_point beat_since{};
    Clock::time_point asked_since{};
    bool marked = false;
  };
  bool read_record(int r);

  std::shared_ptr<store::Store> store_;
  std::string prefix_;
  std::vector<Peer> peers_;
  Millis detect_;
};

}  // namespace gang::core
