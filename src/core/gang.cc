#include "core/gang.h"

#include <algorithm>
#include <new>
#include <optional>

#include "core/control_channel.h"
#include "core/executor.h"
#include "core/failure.h"
#include "core/flight_recorder.h"
#include "store/recording_store.h"
#include "store/store.h"
#include "core/log.h"
#include "core/validate.h"
#include "core/watchdog.h"

namespace gang::core {

namespace {

// Runs f() and returns true; or hands what it threw (a status and a
// message) to failed() and returns false. The posts' one way of turning an
// exception into a failed operation.
template <typename F, typename Failed>
bool caught(F&& f, Failed&& failed) {
  try {
    f();
    return true;
  } catch (const Error& e) {
    failed(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    failed(Status::kNoMemory, "out of memory");
  } catch (const std::exception& e) {
    failed(Status::kInternal, e.what());
  }
  return false;
}

}  // namespace

Gang::~Gang() { shutdown(); }

int Gang::root_rank(int rank) const {
  if (rank < 0 || rank >= size_) return -1;
  return root_ranks_[static_cast<size_t>(rank)];
}

bool Gang::supports(ReduceOp op, DType dtype) const {
  return reducible(op, dtype) && backend_->supports(op, dtype);
}

void Gang::set_stream(void* stream) {
  if (stream != nullptr && !caps_->stream_ordered) {
    fail(Status::kUnsupported, "gang_set_cuda_stream: gang \"", name_,
         "\" works on CPU buffers; only a NULL stream is accepted");
  }
  if (stream == nullptr && caps_->stream_ordered) stream = kLegacyStream;
  stream_.store(stream);
}

Status Gang::async_error() {
  if (!failure_->failed()) {
    std::string message;
    const Status s = backend_->poll_error(&message);
    if (s != Status::kOk) {
      failure_->mark(s, str_cat("gang \"", name_, "\" rank ", rank_, ": the ",
                             backend_name(), " backend reported: ", message));
    }
  }
  return failure_->status();
}

// ---- issuing ----------------------------------------------------------------

void Gang::check(const CollectiveArgs& args) const {
  const bool emulated = caps_->emulates_peers;
  validate(args, rank_, size_, emulated);
  if (is_reduction(args.kind) && !reducible(args.op, args.dtype)) {
    if (args.dtype == DType::kBool) {
      fail(Status::kUnsupported, op_api_name(args.kind),
           ": bool cannot be averaged; use GANG_SUM or GANG_MAX (\"or\"), "
           "GANG_PROD or GANG_MIN (\"and\")");
    }
    fail(Status::kUnsupported, op_api_name(args.kind), ": ",
         dtype_name(args.dtype),
         " cannot be averaged (the mean of integers is not an integer, and "
         "gang does not truncate it silently): use GANG_SUM and divide by "
         "the gang's size, or average a floating type");
  }
  if (is_reduction(args.kind) && !backend_->supports(args.op, args.dtype)) {
    fail(Status::kUnsupported, op_api_name(args.kind), ": the ", backend_name(),
         " backend cannot reduce ", dtype_name(args.dtype), " with ",
         reduce_op_name(args.op));
  }
  if (emulated && is_p2p(args.kind)) {
    fail(Status::kUnsupported, op_api_name(args.kind),
         ": a fake gang has no peers to exchange messages with");
  }
  if (args.kind == OpKind::kRecv && args.source != nullptr && !caps_->any_source) {
    fail(Status::kUnsupported, "gang_recv_any: the ", backend_name(),
         " backend cannot receive from any peer (it names the peer of every message)");
  }
  if (is_p2p(args.kind) && !caps_->tagged_p2p && args.tag != 0) {
    fail(Status::kUnsupported, op_api_name(args.kind), ": tag ", args.tag,
         ": the ", backend_name(),
         " backend matches messages in issue order and takes tag 0 only");
  }
}

std::shared_ptr<Work> Gang::issue(CollectiveArgs args, bool async) {
  check(args);
  return issue_checked(std::move(args), async);
}

Status Gang::run(CollectiveArgs args, std::string* message) {
  check(args);
  const bool posted_at_issue = is_p2p(args.kind) && caps_->tagged_p2p;
  if (open_groups_.load(std::memory_order_relaxed) != 0 || posted_at_issue) {
    const auto work = issue_checked(std::move(args), false);
    return work ? work->wait(Millis(-1), message) : Status::kOk;  // null: in a group
  }
  const char* api = op_api_name(args.kind);
  if (failure_->failed()) failure_->throw_failed(api);
  Operation op;
  op.args = std::move(args);
  op.stream = stream_.load();
  op.stream_completion = stream_completion_.load(std::memory_order_relaxed);
  // A work is made only for what did not end inside the post (a backend
  // work to wait for, an error); it lives here, for this call only.
  std::optional<Work> work;
  const bool ran = executor_->run_here([&] {
    const Clock::time_point now = Clock::now();
    op.deadline = base::deadline_from(now, timeout());
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        fail(Status::kAborted, api, ": gang \"", name_, "\" is being destroyed");
      }
      id = next_issue_++;
      op.seq = next_seq_++;
      if (recorder_) recorder_->issued(id, op.seq, op.args, now);
    }
    const auto make_work = [&] {
      work.emplace(weak_from_this(), recorder_, api, id, op.deadline, 1);
      return &*work;
    };
    if (failure_->failed()) {
      post(op, nullptr, *make_work());
      return;
    }
    caught(
        [&] {
          BackendWorkPtr pending = post_now(op, nullptr);
          if (pending) {
            make_work()->posted(std::move(pending));
          } else if (recorder_) {
            recorder_->ended(id, Status::kOk);  // ended inside the post
          }
        },
        [&](Status status, const std::string& what) {
          (work ? &*work : make_work())->failed(status, what);
        });
  });
  if (!ran) {
    // Something is queued or posting: take the queue, in issue order.
    const auto queued = issue_checked(std::move(op.args), false);
    return queued->wait(Millis(-1), message);
  }
  return work ? work->wait(Millis(-1), message) : Status::kOk;
}

std::shared_ptr<Work> Gang::issue_checked(CollectiveArgs args, bool async) {
  if (open_groups_.load(std::memory_order_relaxed) != 0) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto me = std::this_thread::get_id();
    for (auto& [thread, ops] : groups_) {
      if (thread != me) continue;
      if (args.kind == OpKind::kRecv && args.source != nullptr) {
        fail(Status::kInvalidArgument,
             "gang_recv_any: not inside a group (a group's messages name their peers)");
      }
      if (async) {
        fail(Status::kInvalidArgument, op_api_name(args.kind),
             ": inside a group pass work == NULL; gang_group_end returns the "
             "group's work");
      }
      ops.push_back(std::move(args));
      return nullptr;
    }
  }
  std::vector<CollectiveArgs> ops;
  ops.push_back(std::move(args));
  return submit(std::move(ops), async);
}

void Gang::group_start() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto me = std::this_thread::get_id();
  for (const auto& group : groups_) {
    if (group.first == me) {
      fail(Status::kInvalidArgument,
           "gang_group_start: this thread has a group open on gang \"", name_,
           "\" already; groups do not nest");
    }
  }
  groups_.emplace_back(me, std::vector<CollectiveArgs>{});
  open_groups_.fetch_add(1);
}

std::shared_ptr<Work> Gang::group_end(bool async) {
  std::vector<CollectiveArgs> ops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto me = std::this_thread::get_id();
    auto it = std::find_if(groups_.begin(), groups_.end(),
                           [&](const auto& g) { return g.first == me; });
    if (it == groups_.end()) {
      fail(Status::kInvalidArgument,
           "gang_group_end: this thread has no group open on gang \"", name_,
           "\"");
    }
    ops.swap(it->second);
    groups_.erase(it);
    open_groups_.fetch_sub(1);
  }
  if (ops.empty()) return nullptr;
  return submit(std::move(ops), async);
}

void Gang::refuse_in_group(const char* api) {
  if (open_groups_.load() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const auto me = std::this_thread::get_id();
  for (const auto& group : groups_) {
    if (group.first == me) {
      fail(Status::kInvalidArgument, api,
           ": this thread has a group open on gang \"", name_,
           "\" (gang_group_start); only the collectives and send/recv of the "
           "header may join a group: call ",
           api, " after gang_group_end");
    }
  }
}

std::shared_ptr<Work> Gang::submit(std::vector<CollectiveArgs> ops,
                                   bool async) {
  const char* api =
      ops.size() == 1 ? op_api_name(ops[0].kind) : "gang_group_end";
  if (failure_->failed()) failure_->throw_failed(api);

  const Clock::time_point issued_at = Clock::now();
  const Clock::time_point deadline = base::deadline_from(issued_at, timeout());
  void* const stream = stream_.load();
  const bool stream_completion = stream_completion_.load(std::memory_order_relaxed);
  // Point-to-point on a tagged backend is posted now; everything else goes
  // to the executor, in issue order.
  const bool post_now = caps_->tagged_p2p;
  std::vector<Operation> now;
  std::shared_ptr<Task> task;
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      fail(Status::kAborted, api, ": gang \"", name_, "\" is being destroyed");
    }
    const uint64_t id = next_issue_++;
    for (auto& args : ops) {
      Operation op;
      const bool p2p = is_p2p(args.kind);
      op.seq = p2p ? 0 : next_seq_++;
      op.deadline = deadline;
      op.stream = stream;
      op.stream_completion = stream_completion;
      op.args = std::move(args);
      if (recorder_) recorder_->issued(id, op.seq, op.args, issued_at);
      if (p2p && post_now) {
        now.push_back(std::move(op));
      } else {
        if (!task) task = std::make_shared<Task>();
        task->ops.push_back(std::move(op));
      }
    }
    const int feeders = (now.empty() ? 0 : 1) + (task ? 1 : 0);
    work = std::make_shared<Work>(weak_from_this(), recorder_, api, id,
                                  deadline, feeders);
    if (!now.empty()) {
      // Keep the list short: forget works that ended.
      p2p_works_.erase(
          std::remove_if(p2p_works_.begin(), p2p_works_.end(),
                         [](const std::weak_ptr<Work>& w) {
                           auto live = w.lock();
                           return !live || live->ended();
                         }),
          p2p_works_.end());
      p2p_works_.push_back(work);
    }
  }
  if (!now.empty()) {
    caught(
        [&] {
          std::lock_guard<std::mutex> lock(post_mu_);
          auto all = std::make_unique<CompositeWork>();
          for (const Operation& op : now) all->add(post_to(*backend_, op, size_));
          work->posted(CompositeWork::simplify(std::move(all)));
        },
        [&](Status status, const std::string& what) { work->failed(status, what); });
  }
  if (task) {
    task->work = work;
    executor_->submit(std::move(task), async);
  }
  return work;
}

void Gang::post_task(Task& task) {
  post(task.ops.front(), task.ops.size() == 1 ? nullptr : &task.ops, *task.work);
}

void Gang::post(const Operation& op, const std::vector<Operation>* group, Work& work) {
  if (failure_->failed()) {
    work.complete(Status::kAborted, failure_->earlier(work.api()));
    return;
  }
  caught([&] { work.posted(post_now(op, group)); },
         [&](Status status, const std::string& what) { work.failed(status, what); });
}

BackendWorkPtr Gang::post_now(const Operation& op, const std::vector<Operation>* group) {
  if (debug_ && !caps_->emulates_peers) {
    if (group == nullptr) {
      check_fingerprint(op.args, op.seq, op.deadline);
    } else {
      for (const Operation& o : *group) check_fingerprint(o.args, o.seq, o.deadline);
    }
  }
  // Synchronous backends run the operation inside post(): that is where
  // a rank waits for its peers, which the watchdog may warn about.
  watched_->busy_seq.store(op.seq, std::memory_order_relaxed);
  watched_->busy_kind.store(static_cast<int>(op.args.kind), std::memory_order_relaxed);
  watched_->busy_post.store(++posts_, std::memory_order_release);
  struct Idle {
    Watched& w;
    ~Idle() { w.busy_post.store(0, std::memory_order_relaxed); }
  } idle{*watched_};
  return group == nullptr ? post_to(*backend_, op, size_)
                          : post_group_to(*backend_, *group, size_);
}

void Gang::control(const char* api,
                   const std::function<void(Clock::time_point)>& f) {
  refuse_in_group(api);
  if (failure_->failed()) failure_->throw_failed(api);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      fail(Status::kAborted, api, ": gang \"", name_, "\" is being destroyed");
    }
    id = next_issue_++;
  }
  try {
    Blocking blocking(*this);
    f(deadline_after(timeout()));
  } catch (const Error& e) {
    // Arguments refused before anything moved leave the gang usable.
    if (e.status() == Status::kInvalidArgument ||
        e.status() == Status::kUnsupported) {
      throw;
    }
    Status status = e.status();
    const std::string message = report_failure(api, id, &status, e.what());
    throw Error(status, message);
  }
}

// ---- membership -------------------------------------------------------------

std::shared_ptr<Gang> Gang::shrink(Millis timeout) {
  refuse_in_group("gang_shrink");
  return membership_->shrink(timeout);
}

std::shared_ptr<Gang> Gang::grow(Millis timeout) {
  refuse_in_group("gang_grow");
  std::shared_ptr<Gang> grown = membership_->grow(timeout);
  if (grown) {
    grown->stream_.store(stream_.load());
    grown->stream_completion_.store(stream_completion_.load());
  }
  return grown;
}

std::shared_ptr<Gang> Gang::join(const GangOptions& options) {
  return Membership::join(options);
}

// ---- failure and teardown ---------------------------------------------------

std::string Gang::report_failure(const char* api, uint64_t id, Status* status,
                                 const std::string& what) {
  const std::string op =
      str_cat(api, " (operation ", id, ") on gang \"", name_, "\"");
  // Recorded before the gang fails, so the dump shows how this one ended.
  return failure_->report(op, status, what, [&](Status ended) {
    if (recorder_) recorder_->ended(id, ended);
  });
}

std::string Gang::overdue(const std::string& why) {
  return failure_->overdue(why);
}

void Gang::end_work(const std::string& message) {
  // Closing the transport both unblocks this rank and tells the peers.
  backend_->abort();
  control_->abort();
  if (recorder_) {
    const std::string not_written = recorder_->dump(str_cat("failed: ", message));
    GANG_LOG(kWarn, "gang \"", name_, "\" rank ", rank_, ": ",
             not_written.empty() ? "recent operations written to " + recorder_->path()
                                 : "flight recorder " + not_written);
  }
}

void Gang::abort() {
  failure_->mark(Status::kAborted, str_cat("gang_abort was called on gang \"",
                                        name_, "\" rank ", rank_));
}

void Gang::shutdown() {
  std::call_once(shutdown_once_, [this] {
    if (!executor_) return;  // make() failed before the gang was complete
    // A call another thread is blocked in would hold the teardown until its
    // timeout: end it now (gang_destroy's contract: "aborts the rest").
    if (blocked_.load() > 0) {
      failure_->mark(Status::kAborted,
                  str_cat("gang \"", name_, "\" was destroyed while another "
                          "thread was blocked in a call on it"));
    }
    const Clock::time_point deadline = deadline_after(timeout());
    bool idle = executor_->wait_idle(deadline);
    std::vector<std::weak_ptr<Work>> p2p;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      p2p.swap(p2p_works_);
    }
    for (const auto& weak : p2p) {
      auto w = weak.lock();
      if (!w) continue;
      const auto left = std::chrono::duration_cast<Millis>(
          deadline - Clock::now());
      if (w->wait(std::max(left, Millis(0)), nullptr) == Status::kInProgress) {
        idle = false;
        break;
      }
    }
    if (!idle) {
      failure_->mark(Status::kAborted,
                  str_cat("gang \"", name_,
                          "\" was destroyed with operations in flight"));
    }
    // A blocking call on another thread ends promptly once the backend is
    // aborted; wait for it so that it never runs on a freed gang.
    executor_->stop(Work::kGrace);
    stop_watch();
    if (!failure_->failed()) {
      try {
        backend_->finalize();
      } catch (...) {
        // Teardown is best effort; the gang is going away either way.
      }
    }
    // This rank's record of who it was (liveness.h), and its backend's
    // lasting key (BackendConfig::lasting_store), are nobody's business
    // once it left a gang that ended well (a failed gang's records are its
    // survivors' to forget, as they shrink; and a process ending on a
    // failure, Ctrl-C, starts no thread on its way out).
    if (published_ && !failure_->failed()) {
      std::vector<std::string> keys = {str_cat(store_prefix_, "who/", rank_)};
      if (lasting_ && !lasting_->written().empty()) {
        keys.push_back(str_cat(store_prefix_, "lasting/", rank_));
      }
      if (rank_ == 0) {
        for (std::string& k : membership_->meet_keys()) keys.push_back(std::move(k));
      }
      // Here, on the destroying thread, while the store is surely alive:
      // queued for later, the removal would hold on to a store its owner
      // is tearing down (torch's destroy_process_group, then a new
      // init_process_group on the same port).
      for (const std::string& k : keys) {
        try {
          store_->remove(k);
        } catch (...) {
          break;  // the store is failing: what is left stays
        }
      }
    }
  });
}

}  // namespace gang::core
