// The notice watcher: one thread per process that watches every gang with a
// notice board (a device gang, whose control channel is its own; see
// control_channel.h). Each gang's rank fails fast, not only the one that saw
// the error: the watcher polls each gang's backend for its own errors often
// (they are local and cheap) and fails the gang on one; and it hears of the
// peers' failures through the job's store.
//
// Why one thread and one look per store, not a thread and a look per gang:
// a job of 1024 processes with five device gangs each would otherwise ask
// rank 0's store 50,000 times a second, forever, to learn of failures that
// almost never happen. A failing rank posts its notice on its gang's board
// and then counts it in one job-wide key (ControlChannel::post_failure), so
// the watcher reads only that count, once per look, for each store its
// gangs were made from (a root gang, its splits and sub-gangs, gangs made on
// one gang_store_t share one), and reads the gangs' own boards only when
// the count moved. Looking (a short read, as the per-gang watchers did)
// rather than parking a blocking wait on the key keeps it to what every
// store offers (tcp, torch, redis, file, a caller's callbacks) without a
// connection of its own that must be torn down with the gangs.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace gang::store {
class Store;
}

namespace gang::core {

// What the watcher calls for one gang. Each function runs on the watcher's
// thread only, never after unwatch() returned for the gang, and never while
// another of the gang's runs.
struct NoticeWatch {
  // The store the gang was made from, whose job-wide count of posted
  // failures covers its board. Compared by identity only.
  std::shared_ptr<store::Store> job;
  // The job's ranks as far as the gang knows (its size, or its root gang's
  // where a rank of that is known to be higher): how often to look.
  int job_ranks = 1;
  // Polls the backend's own error; false once the gang has failed (then
  // nothing more is watched for it).
  std::function<bool()> poll;
  // A peer's notice on the gang's board: true and its text.
  std::function<bool(std::string*)> read_board;
  // Fails the gang for the peer's notice `said`.
  std::function<void(const std::string& said)> peer_failed;
};

// How long the watcher waits between looks at the count of a job of
// `job_ranks` ranks, each rank's process looking for itself: 100 ms up to
// 400 ranks; beyond, job_ranks / 4 ms, so that the job's processes ask its
// store about 4,000 times a second together (a job of 4096 processes asked
// 41,000 times a second, forever, at 100 ms), up to 1 s (a notice then
// takes up to that to reach every rank).
inline std::chrono::milliseconds notice_look_interval(int job_ranks) {
  constexpr std::chrono::milliseconds kLook{100}, kAtMost{1000};
  constexpr int64_t kJobLooksPerSecond = 4000;
  const std::chrono::milliseconds spread(int64_t{1000} * std::max(job_ranks, 1) /
                                         kJobLooksPerSecond);
  return std::clamp(spread, kLook, kAtMost);
}

// Watches `w` until unwatch() with the number returned (never 0). Starts
// the process's watcher on first use. Thread-safe.
uint64_t watch_notices(NoticeWatch w);
// Stops watching: when it returns, none of the gang's functions runs or
// will run. Waits for a call of them in progress. A number unknown (0, or
// one already unwatched) is ignored. Never call it from a NoticeWatch
// function.
void unwatch_notices(uint64_t id);

}  // namespace gang::core
