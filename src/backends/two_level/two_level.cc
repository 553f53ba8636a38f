#include "backends/two_level/two_level.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

#include "base/copy.h"
#include "base/secret.h"
#include "core/reduce.h"
#include "core/types.h"
#include "store/store.h"

namespace gang::backends::two_level_impl {

using namespace core;  // the Backend interface this file implements

namespace {

// All-reduces from this size on run in chunks, pipelined: the leaders
// exchange one chunk while their hosts reduce the next and broadcast the
// one before (all_reduce_pipelined). A chunk is at least kPipelineChunk
// bytes, and there are at most kMaxChunks. On two namespaces joined by a
// 10 Gbit/s link (bench/two_hosts.sh), 2 x 2 ranks: 64 MiB 68-70 -> 62-63
// ms, 32 MiB even; 2 x 4: 64 MiB 92-98 -> 82-89 ms, 32 MiB 46-49 -> 43-44;
// at 16 MiB and below no gain.
constexpr size_t kPipelineFrom = 32 << 20;
constexpr size_t kPipelineChunk = 4 << 20;
constexpr size_t kMaxChunks = 8;

// Where the ranks of a gang sit: hosts numbered in order of their lowest
// rank, and each host's ranks in rank order.
struct Layout {
  std::vector<std::vector<int>> members;  // per host
  int host = 0;                           // this rank's
  int local_rank = 0;                     // its place on its host
  int size = 0;                           // ranks in all
  int hosts() const { return static_cast<int>(members.size()); }
  int local_size() const { return static_cast<int>(members[static_cast<size_t>(host)].size()); }
  bool leader() const { return local_rank == 0; }
  int host_of_rank(int r) const {
    for (size_t h = 0; h < members.size(); ++h) {
      if (std::find(members[h].begin(), members[h].end(), r) != members[h].end()) {
        return static_cast<int>(h);
      }
    }
    return -1;
  }
};

Layout layout_of(const std::vector<int>& host_of, int rank) {
  Layout l;
  std::vector<int> ids;
  for (size_t r = 0; r < host_of.size(); ++r) {
    auto it = std::find(ids.begin(), ids.end(), host_of[r]);
    if (it == ids.end()) {
      ids.push_back(host_of[r]);
      l.members.emplace_back();
      it = ids.end() - 1;
    }
    const auto h = static_cast<size_t>(it - ids.begin());
    if (static_cast<int>(r) == rank) {
      l.host = static_cast<int>(h);
      l.local_rank = static_cast<int>(l.members[h].size());
    }
    l.members[h].push_back(static_cast<int>(r));
  }
  l.size = static_cast<int>(host_of.size());
  return l;
}

std::string derived(const std::string& secret, const std::string& label) {
  if (secret.empty()) return secret;
  const base::Digest d = base::hmac_sha256(secret, "two-level " + label);
  return std::string(d.begin(), d.end());
}

class TwoLevel final : public Backend {
 public:
  TwoLevel(std::string name, Layout layout, std::unique_ptr<Backend> flat,
           std::unique_ptr<Backend> local, std::unique_ptr<Backend> leaders)
      : name_(std::move(name)), layout_(std::move(layout)), flat_(std::move(flat)),
        local_(std::move(local)), leaders_(std::move(leaders)) {}

  const char* name() const override { return name_.c_str(); }
  const Capabilities& capabilities() const override { return flat_->capabilities(); }

  bool supports(ReduceOp op, DType dtype) const override {
    const ReduceOp partial = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
    return flat_->supports(op, dtype) && local_->supports(partial, dtype) &&
           (!leaders_ || leaders_->supports(partial, dtype));
  }

  BackendWorkPtr post(const Operation& op) override {
    switch (op.args.kind) {
      case OpKind::kAllReduce:
        all_reduce(op);
        return nullptr;
      case OpKind::kBroadcast:
        broadcast(op);
        return nullptr;
      case OpKind::kAllGather:
        all_gather(op);
        return nullptr;
      case OpKind::kBarrier:
        step(*local_, op, op.args, 0);
        if (leaders_) step(*leaders_, op, op.args, 1);
        step(*local_, op, op.args, 2);
        return nullptr;
      default:
        return flat_->post(op);
    }
  }

  BackendWorkPtr post_group(const std::vector<Operation>& ops) override {
    return flat_->post_group(ops);
  }

  Status poll_error(std::string* message) override {
    for (Backend* b : {flat_.get(), local_.get(), leaders_.get()}) {
      if (b == nullptr) continue;
      const Status s = b->poll_error(message);
      if (s != Status::kOk) return s;
    }
    return Status::kOk;
  }

  void finalize() override {
    for (Backend* b : {flat_.get(), local_.get(), leaders_.get()}) {
      if (b != nullptr) b->finalize();
    }
  }

  void abort() noexcept override {
    for (Backend* b : {flat_.get(), local_.get(), leaders_.get()}) {
      if (b != nullptr) b->abort();
    }
  }

  // For splits: the parts a child of the same kind may share.
  Backend* flat() const { return flat_.get(); }
  Backend* local() const { return local_.get(); }

 private:
  // Runs one step of `parent` on a part, to its end. Every rank of that
  // part runs the same steps of the same operations, so a step's number
  // (from the operation's, n and the chunk) is the same on all of them.
  // Step n of a two-level operation, on the host's gang (n = 0, 2) or the
  // leaders' (n = 1). A part names ranks by its own numbering: its errors
  // are rethrown with the gang's.
  // A pipelined operation's steps also carry their chunk's number.
  void step(Backend& part, const Operation& parent, CollectiveArgs args, int n,
            size_t chunk = 0) const {
    Operation op;
    op.args = std::move(args);
    op.args.outer = outer_of(parent.args);
    op.seq = (parent.seq * 4 + static_cast<uint64_t>(n)) * kMaxChunks + chunk;
    op.channel = parent.channel;
    op.deadline = parent.deadline;
    op.stream = parent.stream;
    try {
      BackendWorkPtr work = post_to(part, op, n == 1 ? layout_.hosts() : layout_.local_size());
      if (work && !work->wait(op.deadline)) {
        throw timed_out(text("the other ranks (a step of ", op_api_name(parent.args.kind),
                             " did not end before the deadline)"));
      }
    } catch (const Error& e) {
      // The part's ranks, as the gang numbers them.
      std::vector<int> ranks;
      if (n == 1) {
        for (const auto& host : layout_.members) ranks.push_back(host[0]);
      } else {
        ranks = layout_.members[static_cast<size_t>(layout_.host)];
      }
      throw e.renumbered(ranks, n == 1 ? Phase::kBetweenHosts : Phase::kWithinHost);
    }
  }

  static CollectiveArgs args_of(OpKind kind, const void* send, void* recv, size_t count,
                                DType dtype, ReduceOp op = ReduceOp::kSum, int root = 0) {
    CollectiveArgs a;
    a.kind = kind;
    a.send = send;
    a.recv = recv;
    a.count = count;
    a.dtype = dtype;
    a.op = op;
    a.root = root;
    return a;
  }

  // Reduce to each host's leader, all-reduce among the leaders, broadcast
  // from each leader: every rank ends with the same bytes.
  void all_reduce(const Operation& op) {
    const CollectiveArgs& a = op.args;
    const ReduceOp partial = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
    const size_t bytes = a.count * dtype_size(a.dtype);
    if (bytes >= kPipelineFrom && all_reduce_pipelined(op)) return;
    step(*local_, op, args_of(OpKind::kReduce, a.send, a.recv, a.count, a.dtype, partial), 0);
    if (layout_.leader()) {
      step(*leaders_, op,
           args_of(OpKind::kAllReduce, a.recv, a.recv, a.count, a.dtype, partial), 1);
      if (a.op == ReduceOp::kAvg) finish_avg(a.recv, a.count, a.dtype, layout_.size);
    }
    step(*local_, op, args_of(OpKind::kBroadcast, a.recv, a.recv, a.count, a.dtype), 2);
  }

  // all_reduce in chunks: each host reduces chunk c to its leader, the
  // leaders all-reduce it on a thread of their own, and the host broadcasts
  // it, every host rank running its steps in the same order: reduce 0,
  // reduce 1, broadcast 0, reduce 2, broadcast 1, ..., broadcast K-1. So the
  // leaders' exchange of chunk c runs while the host reduces chunk c+1 and
  // broadcasts chunk c-1, and the link is kept busy as long as the host's
  // steps keep up with it. False (nothing done) when no thread can be had.
  bool all_reduce_pipelined(const Operation& op) {
    const CollectiveArgs& a = op.args;
    const ReduceOp partial = a.op == ReduceOp::kAvg ? ReduceOp::kSum : a.op;
    const size_t es = dtype_size(a.dtype);
    const size_t chunks =
        std::min(kMaxChunks, a.count * es / kPipelineChunk);
    const auto first = [&](size_t c) { return a.count / chunks * c; };
    const auto count_of = [&](size_t c) {
      return c + 1 == chunks ? a.count - first(c) : a.count / chunks;
    };
    auto* const recv = static_cast<uint8_t*>(a.recv);
    const auto* const send = static_cast<const uint8_t*>(a.send);

    // Between this thread and the leaders' exchange: chunks reduced here,
    // chunks exchanged there, and the exchange's error.
    struct Progress {
      std::mutex mu;
      std::condition_variable cv;
      size_t reduced = 0, exchanged = 0;
      bool stop = false;
      std::optional<Error> failure;  // with its facts, for this thread to throw
    } pr;
    const auto fail_exchange = [&pr](Error e) {
      std::lock_guard<std::mutex> lock(pr.mu);
      pr.failure = std::move(e);
      pr.cv.notify_all();
    };
    std::thread exchange;
    if (layout_.leader()) {
      try {
        exchange = std::thread([&] {
          for (size_t c = 0; c < chunks; ++c) {
            {
              std::unique_lock<std::mutex> lock(pr.mu);
              pr.cv.wait(lock, [&] { return pr.stop || pr.reduced > c; });
              if (pr.stop) return;
            }
            try {
              uint8_t* at = recv + first(c) * es;
              step(*leaders_, op,
                   args_of(OpKind::kAllReduce, at, at, count_of(c), a.dtype, partial), 1, c);
              if (a.op == ReduceOp::kAvg) finish_avg(at, count_of(c), a.dtype, layout_.size);
            } catch (const Error& e) {
              fail_exchange(e);
              return;
            } catch (const std::exception& e) {
              fail_exchange(Error(Status::kInternal, e.what()));
              return;
            }
            std::lock_guard<std::mutex> lock(pr.mu);
            pr.exchanged = c + 1;
            pr.cv.notify_all();
          }
        });
      } catch (const std::system_error&) {
        return false;
      }
    }
    const auto reduce = [&](size_t c) {
      step(*local_, op, args_of(OpKind::kReduce, send + first(c) * es, recv + first(c) * es,
                                count_of(c), a.dtype, partial), 0, c);
      if (!layout_.leader()) return;
      std::lock_guard<std::mutex> lock(pr.mu);
      pr.reduced = c + 1;
      pr.cv.notify_all();
    };
    const auto broadcast = [&](size_t c) {
      if (layout_.leader()) {
        std::unique_lock<std::mutex> lock(pr.mu);
        pr.cv.wait(lock, [&] { return pr.failure || pr.exchanged > c; });
        if (pr.failure) throw *pr.failure;
      }
      uint8_t* at = recv + first(c) * es;
      step(*local_, op, args_of(OpKind::kBroadcast, at, at, count_of(c), a.dtype), 2, c);
    };
    try {
      reduce(0);
      for (size_t c = 1; c < chunks; ++c) {
        reduce(c);
        broadcast(c - 1);
      }
      broadcast(chunks - 1);
    } catch (...) {
      if (exchange.joinable()) {
        {
          std::lock_guard<std::mutex> lock(pr.mu);
          pr.stop = true;
          pr.cv.notify_all();
        }
        // The gang fails with this error; its leaders' exchange must not
        // wait for a peer until the deadline first.
        leaders_->abort();
        exchange.join();
      }
      throw;
    }
    if (exchange.joinable()) exchange.join();
    return true;
  }

  // Within the root's host, then among the leaders, then within the others.
  void broadcast(const Operation& op) {
    const CollectiveArgs& a = op.args;
    const int root_host = layout_.host_of_rank(a.root);
    const auto& on_root_host = layout_.members[static_cast<size_t>(root_host)];
    const int local_root = static_cast<int>(
        std::find(on_root_host.begin(), on_root_host.end(), a.root) - on_root_host.begin());
    if (layout_.host == root_host) {
      step(*local_, op, args_of(OpKind::kBroadcast, a.recv, a.recv, a.count, a.dtype,
                                ReduceOp::kSum, local_root), 0);
    }
    if (layout_.leader()) {
      step(*leaders_, op, args_of(OpKind::kBroadcast, a.recv, a.recv, a.count, a.dtype,
                                  ReduceOp::kSum, root_host), 1);
    }
    if (layout_.host != root_host) {
      step(*local_, op, args_of(OpKind::kBroadcast, a.recv, a.recv, a.count, a.dtype), 2);
    }
  }

  // Gather each host's blocks at its leader, exchange the hosts' blocks
  // among the leaders, put them in rank order, broadcast within each host.
  void all_gather(const Operation& op) {
    const CollectiveArgs& a = op.args;
    const size_t block = a.count * dtype_size(a.dtype);
    auto* out = static_cast<uint8_t*>(a.recv);
    // The leader's scratch, kept per channel (channels may run at once).
    Scratch& scratch = scratch_[static_cast<size_t>(op.channel)];
    std::vector<uint8_t>& mine = scratch.host_blocks;
    mine.resize(layout_.leader() ? block * layout_.local_size() : 0);
    step(*local_, op, args_of(OpKind::kGather, a.send,
                              layout_.leader() ? mine.data() : a.recv, a.count, a.dtype),
         0);
    if (layout_.leader()) {
      std::vector<uint8_t>& all = scratch.all_blocks;
      all.resize(block * static_cast<size_t>(layout_.size));
      CollectiveArgs g = args_of(OpKind::kAllGatherV, mine.data(), all.data(),
                                 a.count * static_cast<size_t>(layout_.local_size()),
                                 a.dtype);
      for (const auto& m : layout_.members) g.recv_counts.push_back(a.count * m.size());
      step(*leaders_, op, std::move(g), 1);
      size_t at = 0;
      for (const auto& m : layout_.members) {
        for (int r : m) {
          if (block != 0) base::copy_bytes(out + static_cast<size_t>(r) * block, all.data() + at, block);
          at += block;
        }
      }
    }
    step(*local_, op, args_of(OpKind::kBroadcast, a.recv, a.recv,
                              a.count * static_cast<size_t>(layout_.size), a.dtype),
         2);
  }

  const std::string name_;
  const Layout layout_;
  std::unique_ptr<Backend> flat_, local_, leaders_;
  struct Scratch {
    std::vector<uint8_t> host_blocks, all_blocks;
  };
  Scratch scratch_[3];  // per Channel
};

std::unique_ptr<Backend> create(const BackendInfo& local_info, const BackendInfo& wide_info,
                                const std::string& name, const BackendConfig& c) {
  const auto* parent = dynamic_cast<const TwoLevel*>(c.parent);
  if (c.host_of.size() != static_cast<size_t>(c.size) || c.size == 1) {
    BackendConfig wide = c;
    if (parent) wide.parent = parent->flat();
    return wide_info.create(wide);
  }
  const Layout l = layout_of(c.host_of, c.rank);
  if (l.hosts() == 1) {
    BackendConfig local = c;
    if (parent) local.parent = parent->local();
    return local_info.create(local);
  }
  if (l.hosts() == c.size) {
    BackendConfig wide = c;
    if (parent) wide.parent = parent->flat();
    return wide_info.create(wide);
  }
  const auto part_store = [&](const std::string& prefix) {
    return c.store ? store::with_prefix(c.store, prefix, c.timeout) : nullptr;
  };
  // Every rank creates the flat gang, then its host's, then (leaders) the
  // leaders': the same order everywhere, so no creation waits in a circle.
  BackendConfig flat = c;
  flat.store = part_store("flat/");
  flat.secret = derived(c.secret, "flat");
  flat.parent = parent ? parent->flat() : nullptr;
  // It runs what the levels do not (point to point, gathers, all-to-all),
  // and has the gang's ranks: the lasting keys are its own.
  flat.seldom_used = true;
  std::unique_ptr<Backend> flat_backend = wide_info.create(flat);

  BackendConfig local = c;
  local.rank = l.local_rank;
  local.size = l.local_size();
  local.local_rank = -1;
  local.local_size = -1;
  local.host_of.assign(static_cast<size_t>(local.size), 0);
  local.store = local.size > 1 ? part_store(str_cat("host", l.host, "/")) : nullptr;
  local.lasting_store = nullptr;
  local.secret = local.size > 1 ? derived(c.secret, str_cat("host ", l.host)) : "";
  // The host's gang and the leaders' are splits of the flat one.
  local.parent = flat_backend.get();
  local.color = l.host;
  local.key = l.local_rank;
  std::unique_ptr<Backend> local_backend = local_info.create(local);

  std::unique_ptr<Backend> leaders_backend;
  if (l.leader()) {
    BackendConfig leaders = c;
    leaders.rank = l.host;
    leaders.size = l.hosts();
    leaders.local_rank = -1;
    leaders.local_size = -1;
    leaders.host_of.clear();
    for (int h = 0; h < l.hosts(); ++h) leaders.host_of.push_back(h);
    leaders.store = part_store("leaders/");
    leaders.lasting_store = nullptr;
    leaders.secret = derived(c.secret, "leaders");
    leaders.parent = flat_backend.get();
    leaders.color = 0;
    leaders.key = l.host;
    leaders_backend = wide_info.create(leaders);
  }
  return std::make_unique<TwoLevel>(name, l, std::move(flat_backend),
                                    std::move(local_backend), std::move(leaders_backend));
}

}  // namespace

BackendInfo two_level(const BackendInfo& local, const BackendInfo& wide) {
  BackendInfo info = wide;
  info.name = local.name + "+" + wide.name;
  info.one_host_only = false;
  info.origin = "built in (two levels: " + local.origin + ", " + wide.origin + ")";
  const std::string name = info.name;
  info.create = [local, wide, name](const BackendConfig& c) {
    return create(local, wide, name, c);
  };
  return info;
}

namespace {

const bool registered = [] {
  register_composer(two_level);
  return true;
}();

}  // namespace

}  // namespace gang::backends::two_level_impl
