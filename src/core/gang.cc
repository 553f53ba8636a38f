#include "core/gang.h"

#include <algorithm>
#include <new>
#include <optional>

#include "core/env.h"
#include "core/flight_recorder.h"
#include "core/local_collective.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/rendezvous.h"
#include "core/validate.h"
#include "store/store.h"

namespace gang::core {

namespace {

// Names gang_create accepts even when this build has no such backend: they
// are GANG_ERR_UNAVAILABLE, not a typo.
constexpr const char* kKnownBackends[] = {"gloo", "nccl", "fake", "shm"};

bool is_known_backend(const std::string& name) {
  for (const char* known : kKnownBackends) {
    if (name == known) return true;
  }
  return find_backend(name) != nullptr;
}

std::string registered_list() {
  std::string out;
  for (const auto& n : backend_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

struct Resolved {
  int rank;
  int size;
  std::string backend;
  Millis timeout;
  std::string name;
  bool debug = false;
  // The launch environment, when rank and size came from it.
  std::optional<env::Launch> launch;
};

Resolved resolve(const GangOptions& o) {
  Resolved r;
  r.rank = o.rank;
  r.size = o.size;
  if (r.rank == -1 && r.size == -1) {
    r.launch = env::detect();
    r.rank = r.launch->rank;
    r.size = r.launch->size;
  } else if (r.rank == -1 || r.size == -1) {
    fail(Status::kInvalidArgument, "gang_create: options.rank is ", o.rank,
         " but options.size is ", o.size, "; set both or neither");
  }
  if (r.size < 1) {
    fail(Status::kInvalidArgument, "gang_create: options.size ", r.size,
         " must be at least 1");
  }
  if (r.rank < 0 || r.rank >= r.size) {
    fail(Status::kInvalidArgument, "gang_create: options.rank ", r.rank,
         " is out of range for size ", r.size);
  }
  r.timeout = o.timeout_ms > 0 ? Millis(o.timeout_ms) : env::timeout();
  r.name = o.name.empty() ? "root" : o.name;
  if (r.name.find_first_of(" \t\n") != std::string::npos) {
    fail(Status::kInvalidArgument, "gang_create: options.name \"", r.name,
         "\" contains whitespace");
  }
  if (o.debug < -1 || o.debug > 1) {
    fail(Status::kInvalidArgument, "gang_create: options.debug ", o.debug,
         " is not -1, 0 or 1");
  }
  r.debug = o.debug == 1 || (o.debug == 0 && env::debug_checks());
  r.backend = o.backend.empty() || o.backend == "auto"
                  ? (o.device_type == DeviceType::kCuda ? "nccl" : "gloo")
                  : o.backend;
  if (!is_known_backend(r.backend)) {
    fail(Status::kInvalidArgument, "gang_create: options.backend \"", r.backend,
         "\" is unknown (this build has: ", registered_list(), ")");
  }
  return r;
}

}  // namespace

// ---- creation -------------------------------------------------------------

std::shared_ptr<Gang> Gang::create(const GangOptions& o) {
  const Resolved r = resolve(o);
  const BackendFactory factory = find_backend(r.backend);
  if (!factory) {
    fail(Status::kUnavailable, "gang_create: backend \"", r.backend,
         "\" is not available in this build (it has: ", registered_list(), ")");
  }

  BackendConfig cfg;
  cfg.rank = r.rank;
  cfg.size = r.size;
  cfg.device_type = o.device_type;
  cfg.device_index = o.device_type == DeviceType::kCpu ? -1 : o.device_index;
  cfg.timeout = r.timeout;

  std::string prefix;
  std::shared_ptr<store::Store> store = o.store;
  if (r.size > 1 && r.backend != "fake") {
    if (!store) {
      store = open_rendezvous(o.init_method, r.rank, r.size, r.timeout,
                              r.launch ? &*r.launch : nullptr);
    }
    // Every creation under one name bumps the counter once per rank, so
    // ranks of the same creation compute the same generation and a reused
    // store never serves an earlier generation's keys.
    const std::string counter = str_cat("gang/", r.name, "/joined");
    const int64_t ticket = store->add(counter, 1);
    const int64_t generation = (ticket - 1) / r.size;
    prefix = str_cat("gang/", r.name, "/", generation, "/");
    cfg.store = store::with_prefix(store, prefix + "backend/", r.timeout);
    try {
      return finish_create(r.name, r.rank, r.size, factory, cfg, prefix, store,
                           r.debug);
    } catch (const Error&) {
      // A creation that failed (a rank never came) must not leave the
      // counter between generations, or every retry on this store would
      // split its ranks across two. Fill the abandoned generation up; the
      // next creation starts a fresh one.
      try {
        const int64_t now = store->add(counter, 0);
        const int64_t missing = (r.size - now % r.size) % r.size;
        if (missing != 0) store->add(counter, missing);
      } catch (...) {
        // Best effort: the store itself may be what failed.
      }
      throw;
    }
  }
  return finish_create(r.name, r.rank, r.size, factory, cfg, prefix,
                       std::move(store), r.debug);
}

std::shared_ptr<Gang> Gang::finish_create(const std::string& name, int rank,
                                          int size, BackendFactory factory,
                                          const BackendConfig& cfg,
                                          const std::string& prefix,
                                          std::shared_ptr<store::Store> store,
                                          bool debug) {
  std::vector<int> identity(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) identity[static_cast<size_t>(i)] = i;
  auto gang = make(name, rank, size, std::move(identity), factory, cfg, prefix);
  gang->store_ = std::move(store);
  gang->debug_ = debug;
  GANG_LOG(kInfo, "created gang \"", name, "\" rank ", rank, " of ", size,
           " on ", gang->backend_name());
  return gang;
}

std::shared_ptr<Gang> Gang::create_fake(int rank, int size) {
  if (size < 1) {
    fail(Status::kInvalidArgument, "gang_create_fake: size ", size,
         " must be at least 1");
  }
  if (rank < 0 || rank >= size) {
    fail(Status::kInvalidArgument, "gang_create_fake: rank ", rank,
         " is out of range for size ", size);
  }
  GangOptions o;
  o.backend = "fake";
  o.rank = rank;
  o.size = size;
  o.name = "root";
  return create(o);
}

std::shared_ptr<Gang> Gang::make(std::string name, int rank, int size,
                                 std::vector<int> root_ranks,
                                 BackendFactory factory,
                                 const BackendConfig& config,
                                 std::string store_prefix) {
  std::shared_ptr<Gang> g(new Gang());
  g->name_ = std::move(name);
  g->rank_ = rank;
  g->size_ = size;
  g->root_ranks_ = std::move(root_ranks);
  g->device_type_ = config.device_type;
  g->device_index_ = config.device_index;
  g->timeout_ms_.store(config.timeout.count());
  g->factory_ = factory;
  g->store_prefix_ = std::move(store_prefix);
  const std::string recorder_path = env::flight_recorder_path();
  if (!recorder_path.empty()) {
    g->recorder_ = std::make_unique<FlightRecorder>(
        recorder_path, g->root_ranks_[static_cast<size_t>(rank)]);
  }
  g->backend_ = factory(config);
  if (size > 1 && !g->backend_->emulates_peers()) {
    // Nobody leaves the rendezvous before everybody is done with the store,
    // so rank 0 may tear the store server down as soon as it wants.
    CollectiveArgs barrier;
    barrier.kind = OpKind::kBarrier;
    g->run_blocking(barrier);
  }
  return g;
}

Gang::~Gang() { shutdown(); }

int Gang::root_rank(int rank) const {
  if (rank < 0 || rank >= size_) return -1;
  return root_ranks_[static_cast<size_t>(rank)];
}

bool Gang::supports(ReduceOp op, DType dtype) const {
  return backend_->supports(op, dtype);
}

Status Gang::async_error() const { return static_cast<Status>(failed_.load()); }

// ---- issuing ----------------------------------------------------------------

void Gang::check(const CollectiveArgs& args) const {
  const bool emulated = backend_->emulates_peers();
  validate(args, rank_, size_, emulated);
  if (is_reduction(args.kind) && !backend_->supports(args.op, args.dtype)) {
    fail(Status::kUnsupported, op_api_name(args.kind), ": the ", backend_name(),
         " backend cannot reduce ", dtype_name(args.dtype), " with ",
         reduce_op_name(args.op));
  }
  if (emulated && (args.kind == OpKind::kSend || args.kind == OpKind::kRecv)) {
    fail(Status::kUnsupported, op_api_name(args.kind),
         ": a fake gang has no peers to exchange messages with");
  }
}

std::shared_ptr<Work> Gang::issue(CollectiveArgs args, bool async) {
  check(args);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (group_open_) {
      if (async) {
        fail(Status::kInvalidArgument, op_api_name(args.kind),
             ": inside a group pass work == NULL; gang_group_end returns the "
             "group's work");
      }
      group_.push_back(std::move(args));
      return nullptr;
    }
  }
  std::vector<CollectiveArgs> ops;
  ops.push_back(std::move(args));
  return submit(std::move(ops), async);
}

void Gang::group_start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (group_open_) {
    fail(Status::kInvalidArgument,
         "gang_group_start: a group is already open on gang \"", name_,
         "\"; groups do not nest");
  }
  group_open_ = true;
}

std::shared_ptr<Work> Gang::group_end(bool async) {
  std::vector<CollectiveArgs> ops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!group_open_) {
      fail(Status::kInvalidArgument,
           "gang_group_end: no group is open on gang \"", name_, "\"");
    }
    group_open_ = false;
    ops.swap(group_);
  }
  if (ops.empty()) return nullptr;
  return submit(std::move(ops), async);
}

void Gang::throw_failed(const char* api) const {
  std::lock_guard<std::mutex> lock(fail_mu_);
  fail(Status::kAborted, api, ": gang \"", name_,
       "\" failed earlier: ", failure_);
}

std::shared_ptr<Work> Gang::submit(std::vector<CollectiveArgs> ops,
                                   bool async) {
  const char* api =
      ops.size() == 1 ? op_api_name(ops[0].kind) : "gang_group_end";
  if (failed_.load() != 0) throw_failed(api);

  auto task = std::make_shared<Task>();
  task->deadline = deadline_after(timeout());
  std::weak_ptr<Gang> self = weak_from_this();
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_)
    fail(Status::kAborted, api, ": gang \"", name_, "\" is being destroyed");
  task->id = next_issue_++;
  for (const auto& op : ops) {
    const bool p2p = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
    task->seqs.push_back(p2p ? 0 : next_seq_++);
  }
  task->work = std::make_shared<Work>(
      task->deadline,
      [self](const std::string& why) {
        if (auto g = self.lock()) g->mark_failed(Status::kTimeout, why);
      },
      api, task->id, name_);
  task->ops = std::move(ops);
  if (recorder_) {
    for (size_t i = 0; i < task->ops.size(); ++i) {
      recorder_->issued(task->id, task->seqs[i], task->ops[i]);
    }
  }

  if (!async && !busy_ && queue_.empty()) {
    // The hot path: run on the caller's thread.
    busy_ = true;
    lock.unlock();
    execute(*task);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
    return task->work;
  }
  queue_.push_back(task);
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  cv_.notify_all();
  return task->work;
}

void Gang::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] {
      return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty());
    });
    if (queue_.empty()) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    execute(*task);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void Gang::execute(Task& task) {
  const char* api =
      task.ops.size() == 1 ? op_api_name(task.ops[0].kind) : "gang_group_end";
  if (failed_.load() != 0) {
    std::lock_guard<std::mutex> lock(fail_mu_);
    if (recorder_) recorder_->ended(task.id, Status::kAborted);
    task.work->complete(
        Status::kAborted,
        str_cat(api, ": gang \"", name_, "\" failed earlier: ", failure_));
    return;
  }
  Status status = Status::kOk;
  std::string what;
  try {
    if (debug_ && !backend_->emulates_peers()) {
      for (size_t i = 0; i < task.ops.size(); ++i) {
        check_fingerprint(task.ops[i], task.seqs[i], task.deadline);
      }
    }
    if (task.ops.size() == 1) {
      backend_->run(task.ops[0], task.seqs[0], task.deadline);
    } else {
      backend_->run_group(task.ops, task.seqs, task.deadline);
    }
  } catch (const Error& e) {
    status = e.status();
    what = e.what();
  } catch (const std::bad_alloc&) {
    status = Status::kNoMemory;
    what = "out of memory";
  } catch (const std::exception& e) {
    status = Status::kInternal;
    what = e.what();
  }
  if (status == Status::kOk) {
    if (recorder_) recorder_->ended(task.id, Status::kOk);
    task.work->complete(Status::kOk, "");
    return;
  }
  std::string message = str_cat(api, " (operation ", task.id, ") on gang \"",
                                name_, "\" rank ", rank_, ": ", what);
  // A failure recorded meanwhile (an abort from another thread, an overdue
  // wait) is why the backend gave up: report that first error.
  if (failed_.load() != 0) {
    std::lock_guard<std::mutex> lock(fail_mu_);
    status = static_cast<Status>(failed_.load());
    message = str_cat(api, " (operation ", task.id, ") on gang \"", name_,
                      "\": ", failure_);
  }
  if (recorder_) recorder_->ended(task.id, status);
  mark_failed(status, message);
  task.work->complete(status, message);
}

void Gang::run_blocking(CollectiveArgs args) {
  check(args);
  std::vector<CollectiveArgs> ops;
  ops.push_back(std::move(args));
  std::string message;
  const Status s = submit(std::move(ops), false)->wait(Millis(-1), &message);
  if (s != Status::kOk) throw Error(s, message);
}

// ---- failure and teardown
// ------------------------------------------------------

void Gang::mark_failed(Status status, const std::string& message) {
  int expected = 0;
  {
    std::lock_guard<std::mutex> lock(fail_mu_);
    if (failed_.compare_exchange_strong(expected, static_cast<int>(status))) {
      failure_ = message;
    }
  }
  if (expected == 0) {
    GANG_LOG(kWarn, "gang \"", name_, "\" rank ", rank_, " failed: ", message);
    // Closing the transport both unblocks this rank and tells the peers.
    backend_->abort();
    if (recorder_) {
      recorder_->dump(name_, rank_, size_, message);
      GANG_LOG(kWarn, "gang \"", name_, "\" rank ", rank_,
               ": recent operations written to ", recorder_->path());
    }
  }
}

void Gang::abort() {
  mark_failed(Status::kAborted, str_cat("gang_abort was called on gang \"",
                                        name_, "\" rank ", rank_));
  cv_.notify_all();
}

void Gang::shutdown() {
  std::call_once(shutdown_once_, [this] {
    std::unique_lock<std::mutex> lock(mu_);
    const bool idle = cv_.wait_until(lock, deadline_after(timeout()), [this] {
      return !busy_ && queue_.empty();
    });
    if (!idle) {
      lock.unlock();
      mark_failed(Status::kAborted,
                  str_cat("gang \"", name_,
                          "\" was destroyed with operations in flight"));
      lock.lock();
    }
    stopping_ = true;
    cv_.notify_all();
    lock.unlock();
    if (worker_.joinable()) worker_.join();
    // A blocking call on another thread ends promptly once the backend is
    // aborted; wait for it so that it never runs on a freed gang.
    lock.lock();
    cv_.wait_for(lock, Work::kGrace, [this] { return !busy_; });
  });
}

}  // namespace gang::core
