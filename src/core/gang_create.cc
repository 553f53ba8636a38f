// Creating gangs: resolving the options, the rendezvous and its generation,
// and assembling a Gang around its backend, executor and control channel.
#include <algorithm>
#include <optional>

#include "core/control_channel.h"
#include "core/env.h"
#include "core/forget.h"
#include "core/liveness.h"
#include "core/executor.h"
#include "core/failure.h"
#include "core/flight_recorder.h"
#include "core/watchdog.h"
#include "core/gang.h"
#include "core/log.h"
#include "core/registry.h"
#include "core/rendezvous.h"
#include "store/recording_store.h"
#include "store/store.h"
#include "topology/host.h"

namespace gang::core {

namespace {

struct Resolved {
  int rank;
  int size;
  Millis timeout;
  std::string name;
  bool debug = false;
  // The launch environment, when rank and size came from it.
  std::optional<env::Launch> launch;
};

// A gang with no rank and size from the caller or a launcher: torch's
// env:// promises both from the environment, so it is refused; otherwise
// the process becomes rank 0 of 1, which is said once per process, since
// processes started by hand would each be a job of their own.
void check_alone(const GangOptions& o) {
  if (!o.store) {
    const bool given = !o.init_method.empty();
    const char* origin = given ? "options.init_method" : "GANG_INIT_METHOD";
    if (env::is_env_url(given ? o.init_method : env::init_method(), origin)) {
      fail(Status::kInvalidArgument, "gang_create: ", origin,
           "=env:// takes the rank and size from the environment, as torch's "
           "env:// does, but none is set: set RANK and WORLD_SIZE (or "
           "GANG_RANK and GANG_SIZE), or start it with a launcher (gangrun, "
           "torchrun)");
    }
  }
  static std::once_flag said;
  std::call_once(said, [] {
    GANG_LOG(kWarn,
             "gang_create: no launcher variables found (GANG_RANK/GANG_SIZE, "
             "torchrun's RANK/WORLD_SIZE, Open MPI, PMI or SLURM), so this "
             "process is a gang of 1 rank, on its own. To run N ranks, start "
             "it with `gangrun --nproc-per-node N`, torchrun, srun or mpirun, "
             "or set GANG_RANK, GANG_SIZE and GANG_INIT_METHOD in each "
             "process; set options.rank and options.size (or GANG_RANK=0 "
             "GANG_SIZE=1) when 1 rank is meant");
  });
}

// More ranks than any job has: 2^24.
constexpr int kMaxRanks = 1 << 24;

Resolved resolve(const GangOptions& o) {
  Resolved r;
  r.rank = o.rank;
  r.size = o.size;
  if (r.rank == -1 && r.size == -1) {
    // A joiner's environment has no rank: a rendezvous of the launch ranks
    // would never admit it, and a gang of 1 on its own is never meant.
    if (std::string replaces; env::joiner(&replaces)) {
      fail(Status::kInvalidArgument,
           "gang_create: this process was started to join a running gang "
           "(GANG_JOIN=1",
           replaces.empty() ? "" : ", in place of rank ", replaces,
           "), so the environment gives it no rank: call gang_join (Python "
           "gang.join()), and the members admit it with gang_grow");
    }
    r.launch = env::detect();
    r.rank = r.launch->rank;
    r.size = r.launch->size;
    if (r.launch->source == "none") check_alone(o);
  } else if (r.rank == -1 || r.size == -1) {
    fail(Status::kInvalidArgument, "gang_create: options.rank is ", o.rank,
         " but options.size is ", o.size, "; set both or neither");
  }
  if (r.size < 1) {
    fail(Status::kInvalidArgument, "gang_create: options.size ", r.size,
         " must be at least 1");
  }
  if (r.size > kMaxRanks) {
    // Checked before anything is sized by it (a fake gang of INT_MAX ranks
    // would allocate gigabytes for nothing).
    fail(Status::kInvalidArgument, "gang_create: options.size ", r.size, " is more than the ",
         kMaxRanks, " ranks a gang may have");
  }
  if (r.rank < 0 || r.rank >= r.size) {
    fail(Status::kInvalidArgument, "gang_create: options.rank ", r.rank,
         " is out of range for size ", r.size);
  }
  r.timeout = o.timeout_ms > 0 ? Millis(o.timeout_ms) : env::timeout();
  // A century is forever; more would overflow the clock arithmetic of
  // every wait below.
  r.timeout = std::min(r.timeout, Millis(base::kCenturyMs));
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
  return r;
}

}  // namespace

std::shared_ptr<Gang> Gang::create(const GangOptions& o) {
  // Store servers the library starts (rank 0's rendezvous) warn through
  // gang's log: refused connections, limits reached.
  route_store_server_log();
  const Resolved r = resolve(o);
  // Log lines show the rank of the process's first gang.
  static std::once_flag rank_once;
  std::call_once(rank_once, [&] { set_log_rank(r.rank); });
  Setup s;
  s.name = r.name;
  s.rank = r.rank;
  s.size = r.size;
  s.root_ranks.resize(static_cast<size_t>(r.size));
  for (int i = 0; i < r.size; ++i) s.root_ranks[static_cast<size_t>(i)] = i;
  // A gang of one is on one host; a bigger one may be, which is known
  // after rendezvous.
  s.backend = choose(o.backend, o.device_type,
                     r.size == 1 ? std::vector<int>{0} : std::vector<int>{});
  s.debug = r.debug;
  s.asked = o.backend.empty() ? "auto" : o.backend;
  s.lineage = o.lineage;

  BackendConfig& cfg = s.config;
  cfg.rank = r.rank;
  cfg.size = r.size;
  if (r.launch) {
    cfg.local_rank = r.launch->local_rank;
    cfg.local_size = r.launch->local_size;
  }
  cfg.host_id = topology::host_id();
  cfg.device_type = o.device_type;
  cfg.device_index = o.device_type == DeviceType::kCpu ? -1 : o.device_index;
  cfg.timeout = r.timeout;
  // One deadline for the whole creation: rendezvous, connections, barrier.
  cfg.deadline = deadline_after(r.timeout);

  if (r.size == 1 || !s.backend.needs_rendezvous) return make(std::move(s));

  std::shared_ptr<store::Store> store = o.store;
  if (!store) {
    store = open_rendezvous(o.init_method, r.rank, r.size, r.timeout,
                            r.launch ? &*r.launch : nullptr);
  }
  // What this rank asks for, which every rank must ask for alike.
  const std::string asks =
      str_cat(s.asked, "/",
              o.device_type == DeviceType::kCuda ? "cuda" : "cpu");
  const std::string meet = o.attempt > 0 ? str_cat(r.name, "#", o.attempt) : r.name;
  Generation gen = join_generation(
      *store, meet, r.rank, r.size, cfg.host_id, asks,
      std::chrono::duration_cast<Millis>(cfg.deadline - Clock::now()), o.lost);
  // Every rank decides alike: they all read the same host numbers.
  s.backend = choose(o.backend, o.device_type, gen.host_of);
  s.store_prefix = std::move(gen.prefix);
  cfg.secret = std::move(gen.secret);
  cfg.host_of = std::move(gen.host_of);
  s.store = store;
  cfg.store = store::with_prefix(store, s.store_prefix + "backend/", r.timeout);
  s.lineage.meet_base = str_cat("gang/", meet, "/");
  const std::string prefix = s.store_prefix;
  auto g = make(std::move(s));
  if (r.rank == 0) {
    // Past the creation's barrier every rank has read the rendezvous (and
    // the secret, which is better gone from the store).
    std::vector<std::string> keys = {prefix + "go"};
    for (int i = 1; i < r.size; ++i) keys.push_back(str_cat(prefix, "hello/", i));
    forget(store, std::move(keys));
  }
  return g;
}

std::shared_ptr<Gang> Gang::create_fake(int rank, int size) {
  if (size < 1 || size > kMaxRanks) {
    fail(Status::kInvalidArgument, "gang_create_fake: size ", size,
         size < 1 ? " must be at least 1" : str_cat(" is more than the ", kMaxRanks,
                                                    " ranks a gang may have"));
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

std::unique_ptr<ControlChannel> Gang::own_control(const Setup& s) {
  // A flat backend: control traffic is small, and two levels would need
  // control channels of their own.
  // Gangs made without a rendezvous (of one rank, or fake) are on this host.
  const std::vector<int> hosts =
      s.config.host_of.empty() ? std::vector<int>{0} : s.config.host_of;
  BackendInfo host = choose("", DeviceType::kCpu, hosts, /*compose=*/false);
  BackendConfig cfg = s.config;
  cfg.device_type = DeviceType::kCpu;
  cfg.device_index = -1;
  cfg.parent = s.control_parent;
  cfg.store = s.store ? store::with_prefix(s.store, s.store_prefix + "control/",
                                           s.config.timeout)
                      : nullptr;
  auto backend = host.create(cfg);
  if (!backend->capabilities().host_memory) {
    fail(Status::kInternal, "gang_create: the control channel's backend ",
         backend->name(), " does not take host memory");
  }
  GANG_LOG(kInfo, "gang \"", s.name, "\" rank ", s.rank, ": control channel on ",
           backend->name(), " beside ", s.backend.name);
  return std::make_unique<ControlChannel>(std::move(backend), s.size);
}

std::shared_ptr<Gang> Gang::make(Setup s) {
  std::shared_ptr<Gang> g(new Gang());
  g->name_ = s.name;
  g->rank_ = s.rank;
  g->size_ = s.size;
  g->root_ranks_ = s.root_ranks;
  g->device_type_ = s.config.device_type;
  g->device_index_ = s.config.device_index;
  g->local_rank_ = s.config.local_rank;
  g->local_size_ = s.config.local_size;
  g->host_id_ = s.config.host_id;
  g->host_of_ = s.config.host_of;
  g->debug_ = s.debug;
  g->asked_backend_ = s.asked;
  g->timeout_ms_.store(s.config.timeout.count());
  g->store_ = s.store;
  g->store_prefix_ = s.store_prefix;
  g->secret_ = s.config.secret;
  const std::string recorder_path = env::flight_recorder_path();
  if (!recorder_path.empty()) {
    g->recorder_ = std::make_shared<FlightRecorder>(
        recorder_path, g->root_ranks_[static_cast<size_t>(s.rank)], s.name,
        s.rank, s.size);
  }
  s.config.name = s.name;
  // What the backend writes to its store, to forget once every rank made
  // its backend (when the backend is done with the store by then).
  std::shared_ptr<store::RecordingStore> backend_keys;
  if (s.config.store && !s.made) {
    backend_keys = std::make_shared<store::RecordingStore>(s.config.store);
    s.config.store = backend_keys;
    // Beside the recorded keys: forgotten with the rank's record of itself
    // (gang.cc, Membership::forget_shrink).
    if (s.store) {
      g->lasting_ = std::make_shared<store::RecordingStore>(
          store::with_prefix(s.store, s.store_prefix + "lasting/", s.config.timeout));
      s.config.lasting_store = g->lasting_;
    }
  }
  g->backend_ = s.made ? std::move(s.made) : s.backend.create(s.config);
  g->caps_ = &g->backend_->capabilities();
  // A device backend asked for -1 says which device it chose.
  if (const int chosen = g->backend_->device_index(); chosen >= 0) g->device_index_ = chosen;
  g->watched_ = std::make_shared<Watched>();
  g->watched_->gang = s.name;
  g->watched_->rank = s.rank;
  g->watched_->warns_itself = g->caps_->warns_while_waiting;
  g->watched_->recorder = g->recorder_;
  watch_gang(g->watched_);
  g->control_ = g->caps_->host_memory
                    ? std::make_unique<ControlChannel>(g->backend_.get(), g->size_)
                    : own_control(s);
  g->backend_info_ = std::move(s.backend);
  const bool noticed = g->control_->owns_backend() && s.store && s.size > 1;
  // The gang's own members call these, never after it is gone: raw `this`
  // is safe in them, as in the executor's.
  Gang* raw = g.get();
  FailureHooks hooks;
  hooks.post_notice = [raw](const std::string& m) { raw->control_->post_failure(m); };
  hooks.abort = [raw](const std::string& m) { raw->end_work(m); };
  hooks.note_fence = [raw] { raw->membership_->note_fence(); };
  // A gang with a notice board names the first failure there; the others
  // record failures in the store.
  g->failure_ = std::make_unique<FailureState>(
      s.name, s.rank, s.debug,
      Attribution(noticed ? nullptr : s.store, s.store_prefix, s.rank, s.size),
      std::move(hooks));
  g->membership_ = std::make_unique<Membership>(g->member_gang());
  g->executor_ = std::make_unique<Executor>([raw](Task& t) { raw->post_task(t); });
  if (noticed) {
    // Before the barrier: setting the board up asks the store once, which
    // every rank still needs until then.
    g->control_->set_notice_board(
        store::with_prefix(s.store, s.store_prefix + "notice/",
                           s.config.timeout),
        s.store);
  }
  if (s.store && s.size > 1 && !g->caps_->emulates_peers) {
    // Who this rank is, for membership changes to tell failed from slow
    // (liveness.h): recorded before the barrier, so every rank's record is
    // there once the gang is.
    publish_self(*s.store, s.store_prefix, s.rank);
    keep_beating(s.store);
    g->published_ = true;
  }
  if (s.size > 1 && !g->caps_->emulates_peers) {
    // Nobody leaves the rendezvous before everybody is done with the store,
    // so rank 0 may tear the store server down as soon as it wants.
    g->control_->barrier(std::min(s.config.deadline,
                                  deadline_after(g->timeout())));
  }
  if (backend_keys && !g->caps_->uses_store_later) {
    // Past the barrier every rank has made its backend.
    forget(backend_keys->inner(), backend_keys->written());
  }
  // As the gang met: a creation that failed forgets nothing of where it met.
  g->membership_->set_lineage(std::move(s.lineage));
  if (noticed) g->start_watch();
  GANG_LOG(kInfo, "created gang \"", g->name_, "\" rank ", g->rank_, " of ",
           g->size_, " on ", g->backend_name());
  return g;
}

MemberGang Gang::member_gang() {
  MemberGang m;
  m.name = name_;
  m.rank = rank_;
  m.size = size_;
  m.device_type = device_type_;
  m.device_index = device_index_;
  m.debug = debug_;
  m.asked = asked_backend_;
  m.store = store_;
  m.prefix = store_prefix_;
  m.failure = failure_.get();
  // Membership is this gang's own: raw `this` is safe in these.
  m.timeout = [this] { return timeout(); };
  m.control = [this](const char* api,
                     const std::function<void(ControlChannel&, Clock::time_point)>& f) {
    control(api, [&](Clock::time_point deadline) { f(*control_, deadline); });
  };
  m.survivors = [this](const std::vector<int>& members, const std::string& label,
                       const std::string& name, Millis window, Lineage lineage) {
    return survivors_gang(members, label, name, window, std::move(lineage));
  };
  return m;
}

}  // namespace gang::core
