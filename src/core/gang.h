// The Gang facade: every operation enters here, through issue(), so that
// validation, sequence numbers, deadlines and the failed state exist once.
//
// Execution model. Collectives are posted to the backend in issue order on
// every rank, by the executor (on the caller's thread when nothing is
// queued). On a backend with tagged point-to-point (every CPU backend),
// sends and receives are posted the moment they are issued and matched by
// (peer, tag), so any pattern MPI allows completes. Groups belong to the
// thread that opened them. The core's own traffic goes over the control
// channel.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "core/backend.h"
#include "core/collective.h"
#include "core/membership.h"
#include "core/registry.h"
#include "core/work.h"
#include "topology/layout.h"

namespace gang::store {
class RecordingStore;
class Store;
}

namespace gang::core {

class ControlChannel;
class Executor;
class FailureState;
class FlightRecorder;
struct Task;
struct Watched;

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
  // Membership changes (gang_grow) only. A retry of the same creation
  // after it lost a rank meets under a rendezvous of its own
  // ("<name>#<attempt>"), so a rank still holding the last attempt's
  // details never says hello to the next one.
  int attempt = 0;
  // Asked at the rendezvous, while rank 0 waits for rank r's hello (and
  // every other rank for rank 0's go, about rank 0): whether r is known to
  // have failed, and why. Rank 0 then fails the creation on every rank
  // with CreationLost (rendezvous.h), within the detection interval rather
  // than at the timeout.
  std::function<bool(int r, std::string* why)> lost;
  // What the new gang takes on once it met (gang_grow, gang_join).
  Lineage lineage;
};

// Memory handed to the C caller, released with free() (gang_free).
struct HostBytes {
  void* data = nullptr;
  size_t size = 0;
};

class Gang : public std::enable_shared_from_this<Gang> {
 public:
  // Collective over all ranks of the new gang (gang_create.cc). Throws
  // gang::Error.
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
  // A century at most (base::kCenturyMs): more would overflow waits.
  void set_timeout(Millis timeout) {
    timeout_ms_.store(std::min(timeout, Millis(base::kCenturyMs)).count());
  }
  // gang_set_cuda_stream: only device gangs take a non-null stream. On
  // them NULL is the legacy default stream (kLegacyStream for the backend);
  // a gang that set none leaves the backend its own stream.
  void set_stream(void* stream);
  // gang_set_cuda_completion: whether waits of device operations (and
  // blocking calls) return once the caller's stream is ordered after them,
  // instead of once the device is done. CPU gangs accept either: their
  // operations are done on the host when they end.
  void set_stream_completion(bool on) { stream_completion_.store(on); }
  bool stream_completion() const { return stream_completion_.load(); }
  bool supports(ReduceOp op, DType dtype) const;
  // kOk while the gang is healthy, else the status that failed it (also an
  // error the backend noticed on its own).
  Status async_error();

  // Validates and issues one operation. async: returns at once; otherwise
  // returns once posted (the caller waits on the work). Inside a group this
  // thread opened, the operation is only recorded and null is returned.
  std::shared_ptr<Work> issue(CollectiveArgs args, bool async);
  // A blocking call: issues one operation and waits for it; its status,
  // and the error's message in *message. While nothing else is queued on
  // the gang it runs on this thread with nothing allocated (the small
  // sizes' path); otherwise it is issue() and a wait.
  Status run(CollectiveArgs args, std::string* message);

  // Groups belong to the calling thread; other threads' operations meanwhile
  // are issued normally.
  void group_start();
  // Issues this thread's recorded group; null for an empty group.
  std::shared_ptr<Work> group_end(bool async);

  // Collective over this gang; null for ranks outside the new gang.
  std::shared_ptr<Gang> split(int color, int key);
  std::shared_ptr<Gang> create_subgang(const std::vector<int>& ranks);
  // gang_shrink (Membership): collective over the survivors of this
  // (failed) gang; the new gang of the survivors, in rank order.
  std::shared_ptr<Gang> shrink(Millis timeout);
  // gang_grow: collective over the members; the gang of the members and
  // the joiners admitted now, or null when none waits. gang_join: a new
  // process's place in the gang named options.name, once admitted.
  std::shared_ptr<Gang> grow(Millis timeout);
  static std::shared_ptr<Gang> join(const GangOptions& options);
  // Collective over this gang: the gang of every axis of `layout`, indexed
  // by topology::Axis. Axes with the same ranks share one gang; an axis
  // spanning this gang is this gang. Ranks with different layouts fail
  // with kMismatch.
  using AxisGangs = std::array<std::shared_ptr<Gang>, topology::kNumAxes>;
  AxisGangs split_parallel(const topology::Layout& layout);
  // gangs_split_after_loss (membership.cc): collective over this gang, which
  // gang_shrink made from a gang of old_size where this rank was old_rank,
  // laid out by `config`. The survivors learn each other's old ranks, keep
  // the whole replicas (topology/after_loss.h) in a new gang, and split it
  // by the reduced layout. A spare (a survivor left out) gets null gangs.
  struct AfterLossGangs {
    std::shared_ptr<Gang> active;  // the gang of the kept replicas
    AxisGangs axes;                // its split; axes[kRoot] is `active`
  };
  AfterLossGangs split_after_loss(int old_rank, int old_size,
                                  const topology::ParallelConfig& config);

  // Byte payloads and helpers (blocking, over the control channel). See
  // gang.h for their contracts.
  HostBytes broadcast_bytes(const void* data, size_t len, int root);
  HostBytes all_gather_bytes(const void* data, size_t len, size_t* lens,
                             size_t nlens);
  void send_bytes(const void* data, size_t len, int peer, int tag);
  HostBytes recv_bytes(int peer, int tag);
  int broadcast_flag(int flag, int root);
  double all_sum(double value);

  // Held by a thread for as long as it is blocked in a call on this gang (a
  // blocking collective, a control call): a shutdown() from another thread
  // then aborts that call at once instead of waiting for it.
  class Blocking {
   public:
    explicit Blocking(Gang& gang) : gang_(gang) { gang_.blocked_.fetch_add(1); }
    ~Blocking() { gang_.blocked_.fetch_sub(1); }
    Blocking(const Blocking&) = delete;
    Blocking& operator=(const Blocking&) = delete;

   private:
    Gang& gang_;
  };

  // Fails the gang (if healthy) and makes in-flight work end promptly.
  void abort();
  // gang_destroy: waits at most the timeout for in-flight work, aborts the
  // rest, stops the executor. Idempotent.
  void shutdown();

  // For Work: the message of a failed operation, after failing the gang
  // with it. *status becomes the gang's first error when an earlier failure
  // (an abort, an overdue wait) is why this operation failed.
  std::string report_failure(const char* api, uint64_t id, Status* status,
                             const std::string& what);
  // For Work: an operation outlived its deadline; fails the gang, returns
  // the message.
  std::string overdue(const std::string& why);

 private:
  // Everything make() needs to build a gang (gang_create.cc).
  struct Setup {
    std::string name;
    int rank = 0;
    int size = 1;
    std::vector<int> root_ranks;
    BackendInfo backend;
    BackendConfig config;
    // The rendezvous store (unprefixed) and this gang's prefix in it; null
    // and "" when the gang needs no rendezvous.
    std::shared_ptr<store::Store> store;
    std::string store_prefix;
    // The parent's own control backend, for a child that needs one too.
    Backend* control_parent = nullptr;
    // The backend, when a native split already made it.
    std::unique_ptr<Backend> made;
    bool debug = false;
    // The backend the gang's creator asked for ("auto", "gloo", ...): what
    // a grown gang asks for again, and what a joiner must ask for too.
    std::string asked = "auto";
    // What the gang takes on once it met.
    Lineage lineage;
  };

  Gang() = default;
  static std::shared_ptr<Gang> make(Setup setup);
  // The control channel of a gang whose backend takes no host memory: a
  // host backend of its own, meeting under <prefix>control/.
  static std::unique_ptr<ControlChannel> own_control(const Setup& setup);

  // Validation and capability checks, before anything is issued.
  void check(const CollectiveArgs& args) const;
  std::shared_ptr<Work> submit(std::vector<CollectiveArgs> ops, bool async);
  // The executor's callback: posts a task's operations.
  void post_task(Task& task);
  // Posts `op`, or the group `group` (whose first operation is op), and
  // hands what is left to `work`; never throws.
  void post(const Operation& op, const std::vector<Operation>* group, Work& work);
  // post()'s part that reaches the backend: what is left to wait for (null
  // when it ended there); throws what the backend threw.
  BackendWorkPtr post_now(const Operation& op, const std::vector<Operation>* group);
  // issue() after check().
  std::shared_ptr<Work> issue_checked(CollectiveArgs args, bool async);
  // Debug checks: every rank compares what it is about to run (one
  // all-gather over the control channel) and a difference is kMismatch
  // naming both calls.
  void check_fingerprint(const CollectiveArgs& args, uint64_t seq,
                         Clock::time_point deadline);
  void check_counts(const CollectiveArgs& args, uint64_t seq,
                    Clock::time_point deadline);
  // Runs `f` (control traffic of the public call `api`): refused inside
  // this thread's open group and on a failed gang; an error fails the gang.
  void control(const char* api,
               const std::function<void(Clock::time_point deadline)>& f);
  void check_p2p_bytes(OpKind kind, int peer, int tag);
  // Throws kInvalidArgument naming `api` if this thread has a group open.
  void refuse_in_group(const char* api);
  // What failing does to the gang (FailureHooks::abort): makes its work end
  // and dumps the flight recorder.
  void end_work(const std::string& message);
  // Watching (gang_watch.cc): a gang with a notice board is watched by the
  // process's notice watcher (notice_watcher.h) for its backend's own errors
  // and its peers' notices, from start_watch until stop_watch.
  void start_watch();
  void stop_watch();
  // The setup of a gang of `members` (ranks of this gang, this rank among
  // them), named <name>/<label>, meeting under <store prefix>/<store_label>/.
  // color and key are passed to the backend for a native split.
  Setup child_setup(const std::vector<int>& members, const std::string& label,
                    const std::string& store_label, int color, int key);
  std::shared_ptr<Gang> make_child(Setup setup);
  // What Membership needs of this gang (gang_create.cc).
  MemberGang member_gang();
  // The gang of the survivors of a shrink (MemberGang::survivors).
  std::shared_ptr<Gang> survivors_gang(const std::vector<int>& members,
                                       const std::string& label,
                                       const std::string& name, Millis window,
                                       Lineage lineage);
  // gang_split on a backend that may split natively: every rank takes part
  // (members empty and color -1 for a rank that stays out). *native false:
  // the backend has none after all, nothing happened, and null is returned;
  // otherwise the new gang, or null for a rank out of it.
  std::shared_ptr<Gang> split_natively(const std::vector<int>& members,
                                       const std::string& label, int color,
                                       int key, bool* native);

  // Identity.
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> root_ranks_;
  DeviceType device_type_ = DeviceType::kCpu;
  int device_index_ = -1;
  bool debug_ = false;  // fingerprint every collective
  std::atomic<int64_t> timeout_ms_{0};
  std::atomic<void*> stream_{nullptr};  // as Operation::stream has it
  std::atomic<bool> stream_completion_{false};

  // Backend and rendezvous.
  std::unique_ptr<Backend> backend_;
  const Capabilities* caps_ = nullptr;
  std::unique_ptr<ControlChannel> control_;
  BackendInfo backend_info_;  // makes the sub-gangs' backends
  std::string asked_backend_ = "auto";  // Setup::asked
  int local_rank_ = -1;
  int local_size_ = -1;
  std::string host_id_;
  std::vector<int> host_of_;  // per rank, its host's number (BackendConfig)
  std::shared_ptr<store::Store> store_;
  std::string store_prefix_;  // gang/<name>/<generation>/
  bool published_ = false;    // its who/<rank> record is in the store
  // Its backend's lasting key, if it set one (BackendConfig::lasting_store).
  std::shared_ptr<store::RecordingStore> lasting_;
  std::string secret_;        // BackendConfig::secret; splits derive theirs
  uint64_t splits_ = 0;       // sub-gangs made so far; the same on every rank
  // Shrinking, growing and the fence (made with the failure state).
  std::unique_ptr<Membership> membership_;

  // Issuing.
  std::unique_ptr<Executor> executor_;
  std::mutex mu_;
  uint64_t next_seq_ = 1;    // collectives issued, for the wire
  uint64_t next_issue_ = 0;  // every operation issued, for messages
  std::mutex post_mu_;       // posts point-to-point operations in issue order
  // Point-to-point works posted at issue and maybe not ended yet, which
  // shutdown waits for.
  std::vector<std::weak_ptr<Work>> p2p_works_;
  bool stopping_ = false;
  // Open groups, one per thread that opened one.
  std::vector<std::pair<std::thread::id, std::vector<CollectiveArgs>>> groups_;
  std::atomic<int> open_groups_{0};

  // GANG_FLIGHT_RECORDER: the recent operations, dumped when the gang fails
  // or on request.
  std::shared_ptr<FlightRecorder> recorder_;
  // What the process's watchdog reads (watchdog.h): the operation this rank
  // is blocked in, for wait warnings.
  std::shared_ptr<Watched> watched_;
  uint64_t posts_ = 0;  // tasks posted, by the one thread that posts at a time

  // Threads blocked in a call on this gang (Blocking).
  std::atomic<int> blocked_{0};

  // Failure: the first error, kept for the messages of later calls, and
  // who failed first (made with the control channel, before the executor).
  std::unique_ptr<FailureState> failure_;
  std::once_flag shutdown_once_;

  // This gang's number with the notice watcher (0: not watched).
  uint64_t watch_id_ = 0;
};

}  // namespace gang::core
