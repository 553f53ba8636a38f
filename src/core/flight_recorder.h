// The flight recorder: the last operations of a gang, dumped to a file when
// the gang fails (GANG_FLIGHT_RECORDER) or when the process is asked to
// (SIGURG, watchdog.h), so a hang or a crash of one rank can be read off
// every rank: which operation each rank was in, how long it had waited,
// which ones completed. gang-trace reads the dumps of every rank.
//
// A dump is a header line, a column line and one line per operation:
//   gang "root" rank 2 of 4 (global rank 2) at 2026-11-24T10:02:03.417: <why>
//   op#  seq  call  dtype  op  count  root  status  issued ms ago / took ms
//   ...
// "took" is read to the kernel's clock tick (base::coarse_now: 1-4 ms), so
// that recording an end costs the call little.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/collective.h"
#include "base/error.h"

namespace gang::core {

class FlightRecorder {
 public:
  static constexpr size_t kCapacity = 256;

  // `path` is where dump() writes; "%r" in it becomes `global_rank`, else
  // ".<global_rank>" is appended. The gang's name, rank and size head
  // every dump.
  FlightRecorder(const std::string& path, int global_rank,
                 const std::string& gang, int rank, int size);

  // Operation `id` was issued at `now` (the clock reading its deadline
  // came from); ended(): it ended with `status`.
  void issued(uint64_t id, uint64_t seq, const CollectiveArgs& args,
              Clock::time_point now);
  void ended(uint64_t id, Status status);

  // Appends the recorded operations, oldest first, under a header naming the
  // gang and why (its first error, or a request). Returns "" once written,
  // else why not. It never follows a symbolic link at the path, and writes
  // only to a regular file of this process's user (created 0600, its
  // directory 0700 when missing): a file another user planted there is
  // left alone.
  std::string dump(const std::string& why) const;

  const std::string& path() const { return path_; }

 private:
  struct Entry {
    uint64_t id = 0;
    uint64_t seq = 0;
    OpKind kind = OpKind::kBarrier;
    DType dtype = DType::kUInt8;
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
    size_t count = 0;
    Clock::time_point issued{};
    Clock::time_point ended{};
    Status status = Status::kInProgress;
  };

  std::string path_;
  int global_rank_;
  std::string gang_;
  int rank_, size_;
  mutable std::mutex mu_;
  std::vector<Entry> ring_;
  size_t next_ = 0;  // total recorded; ring_[next_ % kCapacity] is the oldest
};

}  // namespace gang::core
