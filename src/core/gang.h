// The Gang facade: every operation enters here, through issue(), so that
// validation, sequence numbers, timeouts and the failed state exist once.
//
// Execution model. Operations run in issue order on every rank. A blocking
// call issued while nothing is queued runs on the caller's thread (no thread
// hand-off on the hot path); everything else goes to a per-gang worker thread
// started on first need. Either way one operation runs at a time.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/backend.h"
#include "core/collective.h"
#include "core/error.h"
#include "core/work.h"
#include "topology/layout.h"

namespace gang::store {
class Store;
}

namespace gang::core {

class FlightRecorder;

// What gang_create asks for, as the C shim copied it from gang_options_t.
struct GangOptions {
  std::string backend;  // "" means "auto"
  DeviceType device_type = DeviceType::kCpu;
  int device_index = -1;
  int rank = -1;
  int size = -1;
  std::string init_method;
  std::shared_ptr<store::Store> store;
  int64_t timeout_ms = 0;
  std::string name;
  int debug = 0;
};

// Memory handed to the C caller, released with free() (gang_free).
struct HostBytes {
  void* data = nullptr;
  size_t size = 0;
};

class Gang : public std::enable_shared_from_this<Gang> {
 public:
  // Collective over all ranks of the new gang. Throws gang::Error.
  static std::shared_ptr<Gang> create(const GangOptions& options);
  static std::shared_ptr<Gang> create_fake(int rank, int size);

  ~Gang();
  Gang(const Gang&) = delete;
  Gang& operator=(const Gang&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  const char* backend_name() const { return backend_->name(); }
  DeviceType device_type() const { return device_type_; }
  int device_index() const { return device_index_; }
  // -1 for a rank out of range.
  int root_rank(int rank) const;
  Millis timeout() const { return Millis(timeout_ms_.load()); }
  void set_timeout(Millis timeout) { timeout_ms_.store(timeout.count()); }
  bool supports(ReduceOp op, DType dtype) const;
  // kOk while the gang is healthy, else the status that failed it.
  Status async_error() const;

  // Validates and issues one operation. async: returns at once; otherwise
  // returns when it has ended. Inside a group the operation is only recorded
  // and null is returned.
  std::shared_ptr<Work> issue(CollectiveArgs args, bool async);

  void group_start();
  // Issues the recorded group; null for an empty group.
  std::shared_ptr<Work> group_end(bool async);

  // Collective over this gang; null for ranks outside the new gang.
  std::shared_ptr<Gang> split(int color, int key);
  std::shared_ptr<Gang> create_subgang(const std::vector<int>& ranks);
  // Collective over this gang: the gang of every axis of `layout`, indexed
  // by topology::Axis. Axes with the same ranks share one gang; an axis
  // spanning this gang is this gang.
  using AxisGangs = std::array<std::shared_ptr<Gang>, topology::kNumAxes>;
  AxisGangs split_parallel(const topology::Layout& layout,
                           const std::string& fingerprint);

  // Byte payloads and helpers (blocking). See gang.h for their contracts.
  HostBytes broadcast_bytes(const void* data, size_t len, int root);
  HostBytes all_gather_bytes(const void* data, size_t len, size_t* lens,
                             size_t nlens);
  void send_bytes(const void* data, size_t len, int peer, int tag);
  HostBytes recv_bytes(int peer, int tag);
  int broadcast_flag(int flag, int root);
  double all_sum(double value);

  // Fails the gang (if healthy) and makes in-flight work end promptly.
  void abort();
  // gang_destroy: waits at most the timeout for in-flight work, aborts the
  // rest, stops the worker. Idempotent.
  void shutdown();

 private:
  struct Task {
    std::vector<CollectiveArgs> ops;
    std::vector<uint64_t> seqs;  // one per op; 0 for point-to-point
    uint64_t id = 0;             // issue order on this rank, for messages
    Clock::time_point deadline;
    std::shared_ptr<Work> work;
  };

  Gang() = default;

  // The part of create() after the rendezvous is chosen.
  static std::shared_ptr<Gang> finish_create(
      const std::string& name, int rank, int size, BackendFactory factory,
      const BackendConfig& config, const std::string& prefix,
      std::shared_ptr<store::Store> store, bool debug);
  static std::shared_ptr<Gang> make(std::string name, int rank, int size,
                                    std::vector<int> root_ranks,
                                    BackendFactory factory,
                                    const BackendConfig& config,
                                    std::string store_prefix);

  // Validation and capability checks, before anything is issued.
  void check(const CollectiveArgs& args) const;
  std::shared_ptr<Work> submit(std::vector<CollectiveArgs> ops, bool async);
  void execute(Task& task);
  void worker_loop();
  // Runs a blocking internal operation (splits, bytes) and throws its error.
  void run_blocking(CollectiveArgs args);
  // Every rank's `mine`, in rank order (one blocking all-gather).
  std::vector<uint64_t> all_gather_word(uint64_t mine);
  // Debug checks: every rank compares what it is about to run (one
  // all-gather) and a difference is kMismatch naming both calls.
  void check_fingerprint(const CollectiveArgs& args, uint64_t seq,
                         Clock::time_point deadline);
  // Records the first error (later ones are ignored) and aborts the backend.
  void mark_failed(Status status, const std::string& message);
  [[noreturn]] void throw_failed(const char* api) const;
  // A gang of `members` (ranks of this gang, this rank among them), named
  // <name>/<label>, meeting under <store prefix>/<store_label>/.
  std::shared_ptr<Gang> make_child(const std::vector<int>& members,
                                   const std::string& label,
                                   const std::string& store_label);

  // Identity.
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> root_ranks_;
  DeviceType device_type_ = DeviceType::kCpu;
  int device_index_ = -1;
  bool debug_ = false;  // fingerprint every collective
  std::atomic<int64_t> timeout_ms_{0};

  // Backend and rendezvous. The factory makes sub-gangs' backends.
  std::unique_ptr<Backend> backend_;
  BackendFactory factory_ = nullptr;
  std::shared_ptr<store::Store> store_;
  std::string store_prefix_;  // gang/<name>/<generation>/
  uint64_t splits_ = 0;       // sub-gangs made so far; the same on every rank

  // Execution.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
  uint64_t next_seq_ = 1;    // collectives issued, for the wire
  uint64_t next_issue_ = 0;  // every operation issued, for messages
  bool group_open_ = false;
  std::vector<CollectiveArgs> group_;

  // GANG_FLIGHT_RECORDER: the recent operations, dumped when the gang fails.
  std::unique_ptr<FlightRecorder> recorder_;

  // Failure: the first error, kept for the messages of later calls.
  std::atomic<int> failed_{0};
  mutable std::mutex fail_mu_;
  std::string failure_;
  std::once_flag shutdown_once_;
};

}  // namespace gang::core
