#include "backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <set>
#include <type_traits>
#include <utility>

#include <c10/util/Exception.h>

#include "errors.h"
#include "sparse.h"
#include "tensors.h"

namespace gang_torch {
namespace {

// GANG_TORCH_SYNC=1: asynchronous calls run on the caller's thread too
// (their work is done when returned): no overlap, no completer thread.
bool sync_mode() {
  static const bool sync = [] {
    const char* v = std::getenv("GANG_TORCH_SYNC");
    return v != nullptr && std::string(v) == "1";
  }();
  return sync;
}

// How long shutdown() (destroy_process_group) lets works in flight end
// before it aborts them.
constexpr std::chrono::milliseconds kShutdownGrace(5000);

// The tag of monitoredBarrier's messages: the last one, which c10d's
// callers (tags from 0) do not reach in practice.
constexpr int kMonitorTag = GANG_TAG_MAX;

// Every backend alive, for shutdown_all at exit.
std::mutex& live_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::set<GangBackend*>& live() {
  static auto* s = new std::set<GangBackend*>();
  return *s;
}

int64_t millis(std::chrono::milliseconds t) { return t.count() > 0 ? t.count() : 600000; }

// Options::group_name, where this torch has it (not 2.8).
template <typename O, typename = void>
struct has_group_name : std::false_type {};
template <typename O>
struct has_group_name<O, std::void_t<decltype(std::declval<O&>().group_name)>>
    : std::true_type {};

template <typename O>
void name_options(O& options, const std::string& name) {
  if constexpr (has_group_name<O>::value) options.group_name = name;
}
template <typename O>
std::string options_name(const O& options) {
  if constexpr (has_group_name<O>::value) {
    return options.group_name;
  } else {
    return std::string();
  }
}

std::string gang_name(const std::string& group_name) { return "torch.pg" + group_name; }

// A plan's device as torch writes it.
std::string device_name(int device) {
  return device == Plan::kCpu ? std::string("cpu") : "cuda:" + std::to_string(device);
}


}  // namespace

GangBackend::GangBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string group_name)
    : c10d::Backend(rank, size),
      store_(std::make_shared<StoreHandle>(store, millis(timeout))),
      options_(c10::make_intrusive<Options>("gang", std::chrono::milliseconds(millis(timeout)))),
      name_(std::move(group_name)),
      completer_(name_) {
  name_options(*options_, name_);
  gang_ = meet(*store_, rank, size, millis(timeout), gang_name(name_));
  cuda_ = std::make_unique<CudaSide>(store_, rank, size, millis(timeout), gang_name(name_));
  std::lock_guard<std::mutex> lock(live_mutex());
  live().insert(this);
}

GangBackend::GangBackend(gang_t* gang, bool owned, std::shared_ptr<StoreHandle> store,
                         std::chrono::milliseconds timeout, std::string group_name)
    : c10d::Backend(gang_rank(gang), gang_size(gang)),
      gang_(gang),
      owned_(owned),
      store_(std::move(store)),
      options_(c10::make_intrusive<Options>("gang", timeout)),
      name_(std::move(group_name)),
      completer_(name_) {
  name_options(*options_, name_);
  cuda_ = std::make_unique<CudaSide>(store_, gang_rank(gang), gang_size(gang), millis(timeout),
                                     gang_name(name_));
  std::lock_guard<std::mutex> lock(live_mutex());
  live().insert(this);
}

GangBackend::~GangBackend() {
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    live().erase(this);
  }
  stop(std::chrono::milliseconds(0));
  cuda_.reset();
  for (gang_work_t* w : orphans_) gang_work_destroy(w);
  if (owned_ && gang_ != nullptr) gang_destroy(gang_);
}

void GangBackend::setTimeout(std::chrono::milliseconds timeout) {
  options_->timeout = timeout;
  check(gang_set_timeout(gang_, millis(timeout)), "set_timeout");
  cuda_->set_timeout(millis(timeout));
}

void GangBackend::abort_gangs() {
  if (gang_ != nullptr) gang_abort(gang_);
  if (cuda_) cuda_->abort();
}

void GangBackend::abort() {
  abort_gangs();
  shutdown();
}

void GangBackend::eagerConnectSingleDevice(at::Device device) {
  if (device.is_cuda()) cuda_->gang(device.has_index() ? device.index() : 0);
}

void GangBackend::shutdown() { stop(kShutdownGrace); }

void GangBackend::stop(std::chrono::milliseconds grace) {
  if (shut_) return;
  shut_ = true;
  // Orphans (a failed monitored barrier's) never end on their own.
  if (!orphans_.empty() && gang_ != nullptr) gang_abort(gang_);
  completer_.stop(grace, [this] { abort_gangs(); });
}

void GangBackend::shutdown_all() {
  std::vector<GangBackend*> all;
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    all.assign(live().begin(), live().end());
  }
  // What is still in flight at exit waits for peers that may be gone (one
  // that exited first never issues its half): abort, never wait.
  for (GangBackend* b : all) {
    if (b->completer_.busy()) b->abort_gangs();
  }
  for (GangBackend* b : all) {
    b->completer_.stop(std::chrono::milliseconds(0), [b] { b->abort_gangs(); });
  }
}

// ---- issuing -----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> GangBackend::issue_now(Plan plan, std::vector<at::Tensor> outputs,
                                                      bool async_op, c10d::OpType type,
                                                      const char* name,
                                                      std::shared_ptr<int> source) {
  if (coalescing_) return coalesce(std::move(plan), std::move(outputs), type, name);
  if (plan.device >= 0) return issue_cuda(std::move(plan), std::move(outputs), async_op, type, name);
  uint64_t seq = ++seq_;
  if (!async_op || sync_mode() || plan.steps.empty()) {
    for (auto& s : plan.steps) run_blocking(s, name);
    for (auto& fn : plan.after) fn();
    auto done = GangWork::done(getRank(), type, seq, name, std::move(outputs));
    done->set_source(std::move(source));
    return done;
  }
  auto work = c10::make_intrusive<GangWork>(getRank(), type, seq, name, outputs, gang_);
  work->set_source(std::move(source));
  std::vector<gang_work_t*> works;
  works.reserve(plan.steps.size());
  gang_status_t failed = GANG_OK;
  std::exception_ptr error;
  for (auto& s : plan.steps) {
    gang_work_t* w = nullptr;
    gang_status_t status = s(&w);
    if (w != nullptr) works.push_back(w);  // a failed group's, which still runs
    if (status != GANG_OK) {
      error = error_of(status, name);
      failed = status;
      break;
    }
  }
  work->adopt(std::move(plan), std::move(works));
  if (failed != GANG_OK) {
    // What was issued before the failure still ends (on its own deadline).
    completer_.submit(work);
    std::rethrow_exception(error);
  }
  completer_.submit(work);
  return work;
}

// In stream order (cuda.h): the call returns once its operations are
// enqueued; a blocking one has the caller's current stream wait for them.
// The completer watches the call's end event until the device is done,
// holding the call's tensors until then, and completes the Work (its
// exception, if the device's gang failed). GANG_TORCH_SYNC=1: the host
// waits here.
c10::intrusive_ptr<c10d::Work> GangBackend::issue_cuda(Plan plan, std::vector<at::Tensor> outputs,
                                                       bool async_op, c10d::OpType type,
                                                       const char* name) {
  uint64_t seq = ++seq_;
  const int device = plan.device;
  CudaIssued issued = cuda_->issue(device, plan, outputs, name);
  auto work = c10::make_intrusive<GangWork>(getRank(), type, seq, name, outputs, issued.gang);
  std::shared_ptr<StreamEnd> end = issued.end;
  const bool captured = !issued.future;
  work->adopt_cuda(std::move(plan), end, std::move(issued.future));
  if (captured) {
    work->finish();  // the graph's launches run it
  } else if (sync_mode()) {
    end->synchronize();
    work->drive(-1);
    work->finish();
  } else {
    completer_.submit(work);
  }
  if (issued.error) std::rethrow_exception(issued.error);
  if (!async_op) end->order_current();
  return work;
}

// ---- coalescing ------------------------------------------------------------

void GangBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "gang: startCoalescing while the group coalesces already");
  coalescing_ = true;
  coalesced_ = Plan();
  coalesced_outputs_.clear();
}

c10::intrusive_ptr<c10d::Work> GangBackend::coalesce(Plan plan, std::vector<at::Tensor> outputs,
                                                     c10d::OpType type, const char* name) {
  if (plan.device != Plan::kUnplaced) {
    if (coalesced_.device != Plan::kUnplaced && coalesced_.device != plan.device) {
      refuse("coalesced calls take tensors of one device: " + device_name(coalesced_.device) +
             " and " + device_name(plan.device));
    }
    coalesced_.device = plan.device;
  }
  for (auto& s : plan.steps) coalesced_.step(std::move(s));
  for (auto& fn : plan.after) coalesced_.then(std::move(fn));
  coalesced_outputs_.insert(coalesced_outputs_.end(), outputs.begin(), outputs.end());
  return GangWork::done(getRank(), type, ++seq_, name, std::move(outputs));
}

c10::intrusive_ptr<c10d::Work> GangBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "gang: endCoalescing without startCoalescing");
  coalescing_ = false;
  Plan plan = std::move(coalesced_);
  coalesced_ = Plan();
  std::vector<at::Tensor> outputs = std::move(coalesced_outputs_);
  coalesced_outputs_.clear();
  if (!plan.steps.empty()) {
    gang_t* g = plan.device < 0 ? gang_ : cuda_->gang(plan.device);
    std::vector<Step> steps = std::move(plan.steps);
    plan.steps.clear();
    plan.step([g, steps](gang_work_t** w) {
      gang_status_t status = gang_group_start(g);
      if (status != GANG_OK) return status;
      for (const auto& s : steps) {
        status = s(nullptr);
        if (status != GANG_OK) break;
      }
      // Closed whatever happened: the thread's group must not stay open.
      const gang_status_t end = gang_group_end(g, w);
      return status != GANG_OK ? status : end;
    });
  }
  return issue_now(std::move(plan), std::move(outputs), true, c10d::OpType::COALESCED,
                   "coalesced");
}

void GangBackend::run_blocking(const Step& step, const char* name) {
  gang_status_t status;
  {
    BlockingCall call(gang_);
    status = step(nullptr);
  }
  if (status == GANG_OK) return;
  // Aborted by Ctrl-C: the handler's KeyboardInterrupt, not the abort.
  std::exception_ptr error = error_of(status, name);
  check_signals();
  std::rethrow_exception(error);
}

template <typename Opts>
c10::intrusive_ptr<c10d::Work> GangBackend::issue(Plan plan, std::vector<at::Tensor> outputs,
                                                  const Opts& opts, c10d::OpType type,
                                                  const char* name) {
  return issue_now(std::move(plan), std::move(outputs), opts.asyncOp, type, name);
}

gang_t* GangBackend::gang_for(const at::Tensor& t, Plan& plan) {
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    refuse(std::string("tensors on ") + t.device().str() + " are not supported (CPU and CUDA)");
  }
  const int device = t.device().is_cpu() ? Plan::kCpu : t.device().index();
  if (plan.device != Plan::kUnplaced && plan.device != device) {
    refuse("one call takes tensors of one device: " + device_name(plan.device) + " and " +
           device_name(device));
  }
  plan.device = device;
  return device == Plan::kCpu ? gang_ : cuda_->gang(device);
}

// ---- reductions ----------------------------------------------------------

void GangBackend::plan_reduce(Plan& plan, const at::Tensor& t, const c10d::ReduceOp& op,
                              int root) {
  gang_t* g = gang_for(t, plan);
  at::Tensor flat = flat_inout(t, plan);
  Reduction red = reduction(flat, op, "tensor");
  if (red.bitwise) {
    at::Tensor buf = red.buffer;
    at::Tensor gathered = at::empty({getSize(), buf.numel()}, buf.options());
    plan.step([g, buf, gathered](gang_work_t** w) {
      Buffer in = movable(buf);
      return gang_all_gather(g, in.data, gathered.data_ptr(), in.count, in.dtype, w);
    });
    int rank = getRank();
    auto kind = red.kind;
    plan.after.insert(plan.after.begin(), [buf, gathered, root, rank, kind]() mutable {
      if (root < 0 || root == rank) buf.copy_(combine(gathered, kind));
    });
    return;
  }
  at::Tensor buf = red.buffer;
  gang_op_t gop = red.op;
  if (root < 0) {
    plan.step([g, buf, gop](gang_work_t** w) {
      Buffer b = movable(buf);
      return gang_all_reduce(g, b.data, b.data, b.count, b.dtype, gop, w);
    });
  } else {
    plan.step([g, buf, gop, root](gang_work_t** w) {
      Buffer b = movable(buf);
      return gang_reduce(g, b.data, b.data, b.count, b.dtype, gop, root, w);
    });
  }
}

c10::intrusive_ptr<c10d::Work> GangBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  if (!tensors.empty() && tensors[0].is_sparse()) return allreduce_sparse(tensors, opts);
  if (tensors.size() == 1 && (!opts.asyncOp || sync_mode()) && !coalescing_) {
    // The common blocking call, planned by hand: one contiguous CPU tensor
    // of a dtype gang reduces, with an op gang runs as it is.
    const at::Tensor& t = tensors[0];
    gang_dtype_t dtype;
    auto kind = opts.reduceOp.op_;
    gang_op_t gop = kind == c10d::ReduceOp::SUM       ? GANG_SUM
                    : kind == c10d::ReduceOp::MAX     ? GANG_MAX
                    : kind == c10d::ReduceOp::MIN     ? GANG_MIN
                    : kind == c10d::ReduceOp::PRODUCT ? GANG_PROD
                                                      : GANG_OP_FORCE_32BIT;
    if (gop != GANG_OP_FORCE_32BIT && t.device().is_cpu() && t.is_contiguous() &&
        gang_dtype(t.scalar_type(), &dtype)) {
      uint64_t seq = ++seq_;
      gang_t* g = gang_;
      void* data = t.data_ptr();
      size_t count = t.numel();
      run_blocking([=](gang_work_t** w) {
        return gang_all_reduce(g, data, data, count, dtype, gop, w);
      }, "all_reduce");
      return GangWork::done(getRank(), c10d::OpType::ALLREDUCE, seq, "all_reduce", tensors);
    }
  }
  Plan plan;
  for (const auto& t : tensors) plan_reduce(plan, t, opts.reduceOp, -1);
  return issue(std::move(plan), tensors, opts, c10d::OpType::ALLREDUCE, "all_reduce");
}

// Sparse tensors (DDP's gradients of a sparse embedding): summed as gloo
// sums them, on the caller's thread (the entries' counts decide what the
// second call moves), each tensor given the group's sum.
c10::intrusive_ptr<c10d::Work> GangBackend::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM) {
    refuse("all_reduce of sparse tensors sums only (as gloo's); the op given is not SUM");
  }
  if (coalescing_) refuse("all_reduce of sparse tensors cannot be coalesced");
  uint64_t seq = ++seq_;
  for (auto& t : tensors) {
    TORCH_CHECK(t.is_sparse(), "gang: all_reduce: sparse and dense tensors in one call");
    if (!t.device().is_cpu()) {
      refuse("all_reduce of sparse tensors runs on CPU tensors (as gloo's), not on " +
             t.device().str());
    }
    at::Tensor sum = sparse_sum(gang_, t, getSize(),
                                [this](const Step& step) { run_blocking(step, "all_reduce"); });
    t.copy_(sum);
  }
  return GangWork::done(getRank(), c10d::OpType::ALLREDUCE, seq, "all_reduce", tensors);
}

c10::intrusive_ptr<c10d::Work> GangBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  // One all-reduce per dtype over its tensors packed together.
  Plan plan;
  std::vector<bool> taken(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (taken[i]) continue;
    std::vector<at::Tensor> group;
    std::vector<at::Tensor> parts;
    for (size_t j = i; j < tensors.size(); ++j) {
      if (!taken[j] && tensors[j].scalar_type() == tensors[i].scalar_type() &&
          tensors[j].device() == tensors[i].device()) {
        taken[j] = true;
        group.push_back(tensors[j]);
        parts.push_back(tensors[j].reshape({-1}));
      }
    }
    at::Tensor packed = at::cat(parts);
    plan_reduce(plan, packed, opts.reduceOp, -1);
    plan.then([group, packed]() mutable {
      int64_t offset = 0;
      for (auto& t : group) {
        int64_t n = t.numel();
        t.copy_(packed.slice(0, offset, offset + n).view(t.sizes()));
        offset += n;
      }
    });
  }
  return issue(std::move(plan), tensors, opts, c10d::OpType::ALLREDUCE_COALESCED,
               "all_reduce_coalesced");
}

c10::intrusive_ptr<c10d::Work> GangBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  Plan plan;
  for (const auto& t : tensors) plan_reduce(plan, t, opts.reduceOp, opts.rootRank);
  return issue(std::move(plan), tensors, opts, c10d::OpType::REDUCE, "reduce");
}

void GangBackend::plan_reduce_scatter(Plan& plan, at::Tensor input, const at::Tensor& output,
                                      const c10d::ReduceOp& op, std::vector<size_t> counts) {
  gang_t* g = gang_for(output, plan);
  at::Tensor out = flat_out(output, plan);
  Reduction red = reduction(input, op, "input");
  int size = getSize();
  if (red.bitwise) {
    at::Tensor buf = red.buffer;
    at::Tensor gathered = at::empty({size, buf.numel()}, buf.options());
    plan.step([g, buf, gathered](gang_work_t** w) {
      Buffer in = movable(buf);
      return gang_all_gather(g, in.data, gathered.data_ptr(), in.count, in.dtype, w);
    });
    int64_t lo = 0;
    for (int r = 0; r < getRank(); ++r) lo += counts.empty() ? out.numel() : counts[r];
    int64_t n = out.numel();
    auto kind = red.kind;
    plan.after.insert(plan.after.begin(), [out, gathered, lo, n, kind]() mutable {
      out.copy_(combine(gathered.slice(1, lo, lo + n), kind));
    });
    return;
  }
  at::Tensor in = red.buffer;
  at::Tensor dst = output.is_complex() ? at::view_as_real(out).reshape({-1}) : out;
  gang_op_t gop = red.op;
  if (counts.empty()) {
    plan.step([g, in, dst, gop](gang_work_t** w) {
      Buffer o = movable(dst);
      return gang_reduce_scatter(g, in.data_ptr(), o.data, o.count, o.dtype, gop, w);
    });
  } else {
    if (output.is_complex()) {
      for (auto& c : counts) c *= 2;
    }
    plan.step([g, in, dst, gop, counts](gang_work_t** w) {
      Buffer o = movable(dst);
      return gang_reduce_scatterv(g, in.data_ptr(), o.data, counts.data(), counts.size(),
                                  o.dtype, gop, w);
    });
  }
}

c10::intrusive_ptr<c10d::Work> GangBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "gang: reduce_scatter: ", outputs.size(),
              " outputs for ", inputs.size(), " input lists");
  Plan plan;
  for (size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(static_cast<int>(inputs[i].size()) == getSize(), "gang: reduce_scatter: ",
                inputs[i].size(), " input tensors for a group of ", getSize());
    std::vector<at::Tensor> parts;
    std::vector<size_t> counts;
    bool even = true;
    for (const auto& t : inputs[i]) {
      parts.push_back(t.reshape({-1}));
      counts.push_back(t.numel());
      even = even && t.numel() == outputs[i].numel();
    }
    plan_reduce_scatter(plan, at::cat(parts), outputs[i], opts.reduceOp,
                        even ? std::vector<size_t>() : counts);
  }
  return issue(std::move(plan), outputs, opts, c10d::OpType::REDUCE_SCATTER, "reduce_scatter");
}

c10::intrusive_ptr<c10d::Work> GangBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "gang: reduce_scatter_tensor: input has ",
              input.numel(), " elements, output ", output.numel(),
              "; the input must have the group size (", getSize(), ") times the output's");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "gang: reduce_scatter_tensor: input is ",
              input.scalar_type(), ", output ", output.scalar_type());
  Plan plan;
  bool premul = opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM;
  at::Tensor packed = premul ? input.reshape({-1}).clone() : flat_in(input);
  plan_reduce_scatter(plan, packed, output, opts.reduceOp, {});
  return issue(std::move(plan), {output}, opts, c10d::OpType::_REDUCE_SCATTER_BASE,
               "reduce_scatter_tensor");
}

c10::intrusive_ptr<c10d::Work> GangBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Plan plan;
  bool premul = opts.reduceOp.op_ == c10d::ReduceOp::PREMUL_SUM;
  for (size_t i = 0; i < outputs.size(); ++i) {
    at::Tensor packed = premul ? inputs[i].reshape({-1}).clone() : flat_in(inputs[i]);
    plan_reduce_scatter(plan, packed, outputs[i], opts.reduceOp, {});
  }
  return issue(std::move(plan), outputs, opts, c10d::OpType::COALESCED,
               "reduce_scatter_tensor_coalesced");
}

// ---- data movement -----------------------------------------------------

c10::intrusive_ptr<c10d::Work> GangBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  Plan plan;
  int root = static_cast<int>(opts.rootRank);
  for (const auto& t : tensors) {
    gang_t* g = gang_for(t, plan);
    at::Tensor buf = flat_inout(t, plan);
    plan.step([g, buf, root](gang_work_t** w) {
      Buffer b = movable(buf);
      return gang_broadcast(g, b.data, b.count, b.dtype, root, w);
    });
  }
  return issue(std::move(plan), tensors, opts, c10d::OpType::BROADCAST, "broadcast");
}

namespace {

// Copies the consecutive parts of flat (in flat's dtype: the outputs' own,
// or bytes) into outputs.
void unpack(const at::Tensor& flat, std::vector<at::Tensor>& outputs,
            const std::vector<size_t>& counts) {
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto& o = outputs[i];
    int64_t n = static_cast<int64_t>(counts[i]);
    at::Tensor part = flat.slice(0, offset, offset + n);
    if (part.scalar_type() != o.scalar_type()) part = part.view(o.scalar_type());
    o.copy_(part.view(o.sizes()));
    offset += n;
  }
}

// A flat tensor for what gang moves of `input` (its dtype or bytes).
at::Tensor as_moved(const at::Tensor& flat) {
  gang_dtype_t dtype;
  if (gang_dtype(flat.scalar_type(), &dtype)) return flat;
  return flat.view(at::kByte);
}

}  // namespace

void GangBackend::plan_gather_list(Plan& plan, std::vector<at::Tensor> outputs,
                                   const at::Tensor& input) {
  gang_t* g = gang_for(input, plan);
  at::Tensor src = as_moved(flat_in(input));
  std::vector<size_t> counts;
  bool even = true;
  for (const auto& o : outputs) {
    counts.push_back(moved_count(o));
    even = even && counts.back() == static_cast<size_t>(src.numel());
  }
  size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  at::Tensor flat = at::empty({static_cast<int64_t>(total)}, src.options());
  if (even) {
    plan.step([g, src, flat](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_all_gather(g, s.data, flat.data_ptr(), s.count, s.dtype, w);
    });
  } else {
    plan.step([g, src, flat, counts](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_all_gatherv(g, s.data, s.count, flat.data_ptr(), counts.data(), counts.size(),
                              s.dtype, w);
    });
  }
  plan.then([flat, outputs, counts]() mutable { unpack(flat, outputs, counts); });
}

c10::intrusive_ptr<c10d::Work> GangBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "gang: all_gather: ", outputs.size(),
              " output lists for ", inputs.size(), " inputs");
  Plan plan;
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(static_cast<int>(outputs[i].size()) == getSize(), "gang: all_gather: ",
                outputs[i].size(), " output tensors for a group of ", getSize());
    plan_gather_list(plan, outputs[i], inputs[i]);
    all.insert(all.end(), outputs[i].begin(), outputs[i].end());
  }
  return issue(std::move(plan), all, opts, c10d::OpType::ALLGATHER, "all_gather");
}

void GangBackend::plan_gather_single(Plan& plan, const at::Tensor& output,
                                     const at::Tensor& input) {
  TORCH_CHECK(output.numel() == input.numel() * getSize(),
              "gang: all_gather_into_tensor: output has ", output.numel(), " elements, input ",
              input.numel(), "; the output must have the group size (", getSize(),
              ") times the input's");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "gang: all_gather_into_tensor: output is ", output.scalar_type(), ", input ",
              input.scalar_type());
  gang_t* g = gang_for(input, plan);
  at::Tensor src = as_moved(flat_in(input));
  at::Tensor dst = as_moved(flat_out(output, plan));
  plan.step([g, src, dst](gang_work_t** w) {
    Buffer s = movable(src);
    return gang_all_gather(g, s.data, dst.data_ptr(), s.count, s.dtype, w);
  });
}

c10::intrusive_ptr<c10d::Work> GangBackend::_allgather_base(at::Tensor& output,
                                                            at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  Plan plan;
  plan_gather_single(plan, output, input);
  return issue(std::move(plan), {output}, opts, c10d::OpType::_ALLGATHER_BASE,
               "all_gather_into_tensor");
}

c10::intrusive_ptr<c10d::Work> GangBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Plan plan;
  for (size_t i = 0; i < outputs.size(); ++i) plan_gather_single(plan, outputs[i], inputs[i]);
  return issue(std::move(plan), outputs, opts, c10d::OpType::COALESCED,
               "all_gather_into_tensor_coalesced");
}

c10::intrusive_ptr<c10d::Work> GangBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // output_lists[r][i] = rank r's inputs[i].
  TORCH_CHECK(static_cast<int>(output_lists.size()) == getSize(), "gang: all_gather_coalesced: ",
              output_lists.size(), " output lists for a group of ", getSize());
  Plan plan;
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> outs;
    for (auto& list : output_lists) outs.push_back(list.at(i));
    plan_gather_list(plan, outs, inputs[i]);
  }
  for (auto& list : output_lists) all.insert(all.end(), list.begin(), list.end());
  return issue(std::move(plan), all, opts, c10d::OpType::ALLGATHER_COALESCED,
               "all_gather_coalesced");
}

c10::intrusive_ptr<c10d::Work> GangBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "gang: gather takes one input tensor, not ", inputs.size());
  int root = static_cast<int>(opts.rootRank);
  Plan plan;
  gang_t* g = gang_for(inputs[0], plan);
  at::Tensor src = as_moved(flat_in(inputs[0]));
  std::vector<at::Tensor> result;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "gang: gather: the root needs one list of ", getSize(), " output tensors");
    at::Tensor flat = at::empty({src.numel() * getSize()}, src.options());
    plan.step([g, src, flat, root](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_gather(g, s.data, flat.data_ptr(), s.count, s.dtype, root, w);
    });
    std::vector<at::Tensor> outs = outputs[0];
    std::vector<size_t> counts(getSize(), static_cast<size_t>(src.numel()));
    plan.then([flat, outs, counts]() mutable { unpack(flat, outs, counts); });
    result = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "gang: gather: only the root passes output tensors");
    plan.step([g, src, root](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_gather(g, s.data, nullptr, s.count, s.dtype, root, w);
    });
  }
  return issue(std::move(plan), result, opts, c10d::OpType::GATHER, "gather");
}

c10::intrusive_ptr<c10d::Work> GangBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "gang: scatter takes one output tensor, not ",
              outputs.size());
  int root = static_cast<int>(opts.rootRank);
  Plan plan;
  gang_t* g = gang_for(outputs[0], plan);
  at::Tensor dst = as_moved(flat_out(outputs[0], plan));
  at::Tensor src;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "gang: scatter: the root needs one list of ", getSize(), " input tensors");
    std::vector<at::Tensor> parts;
    for (const auto& t : inputs[0]) parts.push_back(as_moved(flat_in(t)));
    src = at::cat(parts);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "gang: scatter: only the root passes input tensors");
  }
  plan.step([g, src, dst, root](gang_work_t** w) {
    Buffer d = movable(dst);
    return gang_scatter(g, src.defined() ? src.data_ptr() : nullptr, d.data, d.count, d.dtype,
                        root, w);
  });
  return issue(std::move(plan), outputs, opts, c10d::OpType::SCATTER, "scatter");
}

c10::intrusive_ptr<c10d::Work> GangBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  Plan plan;
  gang_t* g = gang_for(input, plan);
  at::Tensor src = as_moved(flat_in(input));
  at::Tensor dst = as_moved(flat_out(output, plan));
  int size = getSize();
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size == 0,
                "gang: all_to_all_single: input (", input.numel(), " elements) and output (",
                output.numel(), ") must be equal and divisible by the group size ", size);
    plan.step([g, src, dst, size](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_all_to_all(g, s.data, dst.data_ptr(), s.count / size, s.dtype, w);
    });
  } else {
    auto row = [](const at::Tensor& t) -> int64_t {
      int64_t rows = t.dim() ? t.size(0) : 1;
      return rows ? t.numel() / rows : 0;
    };
    auto rows = [](const at::Tensor& t) -> int64_t { return t.dim() ? t.size(0) : 1; };
    int64_t in_scale = input.numel() ? src.numel() / input.numel() : 1;
    int64_t out_scale = output.numel() ? dst.numel() / output.numel() : 1;
    std::vector<size_t> send(size), recv(size);
    for (int p = 0; p < size; ++p) {
      int64_t s = input_split_sizes.empty() ? rows(input) / size : input_split_sizes.at(p);
      int64_t r = output_split_sizes.empty() ? rows(output) / size : output_split_sizes.at(p);
      send[p] = static_cast<size_t>(s * row(input) * in_scale);
      recv[p] = static_cast<size_t>(r * row(output) * out_scale);
    }
    plan.step([g, src, dst, send, recv](gang_work_t** w) {
      Buffer s = movable(src);
      return gang_all_to_allv(g, s.data, send.data(), send.size(), dst.data_ptr(), recv.data(),
                              recv.size(), s.dtype, w);
    });
  }
  return issue(std::move(plan), {output}, opts, c10d::OpType::ALLTOALL_BASE,
               "all_to_all_single");
}

c10::intrusive_ptr<c10d::Work> GangBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() &&
                  static_cast<int>(outputs.size()) == getSize(),
              "gang: all_to_all: ", inputs.size(), " inputs and ", outputs.size(),
              " outputs for a group of ", getSize());
  Plan plan;
  gang_t* g = gang_for(inputs[0], plan);
  std::vector<at::Tensor> parts;
  std::vector<size_t> send, recv;
  for (const auto& t : inputs) {
    parts.push_back(as_moved(flat_in(t)));
    send.push_back(parts.back().numel());
  }
  at::Tensor src = at::cat(parts);
  for (const auto& o : outputs) recv.push_back(moved_count(o));
  at::Tensor flat = at::empty(
      {static_cast<int64_t>(std::accumulate(recv.begin(), recv.end(), size_t{0}))},
      src.options());
  plan.step([g, src, flat, send, recv](gang_work_t** w) {
    Buffer s = movable(src);
    return gang_all_to_allv(g, s.data, send.data(), send.size(), flat.data_ptr(), recv.data(),
                            recv.size(), s.dtype, w);
  });
  std::vector<at::Tensor> outs = outputs;
  plan.then([flat, outs, recv]() mutable { unpack(flat, outs, recv); });
  return issue(std::move(plan), outputs, opts, c10d::OpType::ALLTOALL, "all_to_all");
}

// ---- point to point ------------------------------------------------------

c10::intrusive_ptr<c10d::Work> GangBackend::send(std::vector<at::Tensor>& tensors, int dst,
                                                 int tag) {
  Plan plan;
  for (const auto& t : tensors) {
    gang_t* g = gang_for(t, plan);
    at::Tensor buf = flat_in(t);
    plan.step([g, buf, dst, tag](gang_work_t** w) {
      Buffer b = movable(buf);
      return gang_send(g, b.data, b.count, b.dtype, dst, tag, w);
    });
  }
  return issue_now(std::move(plan), tensors, true, c10d::OpType::SEND, "send");
}

c10::intrusive_ptr<c10d::Work> GangBackend::recv(std::vector<at::Tensor>& tensors, int src,
                                                 int tag) {
  Plan plan;
  for (const auto& t : tensors) {
    gang_t* g = gang_for(t, plan);
    at::Tensor buf = flat_out(t, plan);
    plan.step([g, buf, src, tag](gang_work_t** w) {
      Buffer b = movable(buf);
      return gang_recv(g, b.data, b.count, b.dtype, src, tag, w);
    });
  }
  return issue_now(std::move(plan), tensors, true, c10d::OpType::RECV, "recv");
}

c10::intrusive_ptr<c10d::Work> GangBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                          int tag) {
  TORCH_CHECK(tensors.size() == 1, "gang: recv from any source takes one tensor, not ",
              tensors.size());
  Plan plan;
  gang_t* g = gang_for(tensors[0], plan);
  at::Tensor buf = flat_out(tensors[0], plan);
  auto source = std::make_shared<int>(-1);
  int* slot = source.get();
  plan.step([g, buf, tag, slot](gang_work_t** w) {
    Buffer b = movable(buf);
    return gang_recv_any(g, b.data, b.count, b.dtype, tag, slot, w);
  });
  return issue_now(std::move(plan), tensors, true, c10d::OpType::RECVANYSOURCE, "recv",
                   std::move(source));
}

// ---- barriers ------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> GangBackend::barrier(const c10d::BarrierOptions& opts) {
  Plan plan;
  gang_t* g = gang_;
  plan.step([g](gang_work_t** w) { return gang_barrier(g, w); });
  return issue(std::move(plan), {}, opts, c10d::OpType::BARRIER, "barrier");
}

// As gloo's: every rank sends to rank 0 and waits for its answer; rank 0
// waits for each within the timeout and names the ranks that did not come
// (the first, or all of them with wait_all_ranks). Works that never end
// (a missing rank's) are kept until the backend goes, which aborts them.
void GangBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  using clock = std::chrono::steady_clock;
  // As gloo's: an unset timeout is the group's; any other, 0 included, is
  // taken as given.
  auto timeout = opts.timeout != c10d::kUnsetTimeout ? opts.timeout : options_->timeout;
  auto deadline = clock::now() + timeout;
  auto left = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    return std::max<int64_t>(0, ms.count());
  };
  int rank = getRank(), size = getSize();
  // Buffers that outlive this call: a receive that never ended (kept as an
  // orphan) may still be written.
  static const uint8_t token = 1;
  std::vector<uint8_t>& tokens = monitor_tokens_;
  tokens.resize(size);
  auto orphan = [this](gang_work_t* w) {
    std::lock_guard<std::mutex> lock(orphans_mutex_);
    orphans_.push_back(w);
  };
  // Waits for w within the timeout: true if it ended well; an error ends
  // the barrier at once.
  auto arrived = [&](gang_work_t* w, const std::string& what) {
    gang_status_t s = gang_work_wait(w, left());
    if (s == GANG_IN_PROGRESS) {
      orphan(w);
      return false;
    }
    if (s != GANG_OK) {
      std::exception_ptr e = error_of(s, what);
      gang_work_destroy(w);
      std::rethrow_exception(e);
    }
    gang_work_destroy(w);
    return true;
  };
  if (rank != 0) {
    gang_work_t* sent = nullptr;
    gang_work_t* answer = nullptr;
    check(gang_send(gang_, &token, 1, GANG_UINT8, 0, kMonitorTag, &sent), "monitored_barrier");
    check(gang_recv(gang_, &tokens[0], 1, GANG_UINT8, 0, kMonitorTag, &answer),
          "monitored_barrier");
    bool ok = arrived(sent, "monitored_barrier") && arrived(answer, "monitored_barrier");
    if (!ok) {
      C10_THROW_ERROR(DistBackendError,
                      c10::str("Rank ", rank, " successfully reached monitoredBarrier, but "
                               "received errors while waiting for send/recv from rank 0. "
                               "Please check rank 0 logs for faulty rank. (gang: no answer "
                               "within ", timeout.count(), " ms)"));
    }
    return;
  }
  std::vector<gang_work_t*> calls(size, nullptr);
  for (int r = 1; r < size; ++r) {
    check(gang_recv(gang_, &tokens[r], 1, GANG_UINT8, r, kMonitorTag, &calls[r]),
          "monitored_barrier");
  }
  std::vector<int> missing;
  std::string processed;
  for (int r = 1; r < size; ++r) {
    if (!missing.empty() && !wait_all_ranks) {
      orphan(calls[r]);
      continue;
    }
    // Unless it waits for all, rank 0 gives up, as gloo's does, once the
    // time is spent before it turns to the next rank.
    if (!wait_all_ranks && clock::now() > deadline) {
      for (int q = r; q < size; ++q) orphan(calls[q]);
      C10_THROW_ERROR(DistBackendError,
                      c10::str("Rank 0 timed out in monitoredBarrier after ", timeout.count(),
                               " ms.\n",
                               processed.empty()
                                   ? std::string("No ranks successfully processed in "
                                                 "monitoredBarrier.")
                                   : "Successfully processed ranks: " + processed));
    }
    if (arrived(calls[r], "monitored_barrier")) {
      processed += (processed.empty() ? "" : ", ") + std::to_string(r);
    } else {
      missing.push_back(r);
    }
  }
  if (!missing.empty()) {
    std::string ranks;
    for (size_t i = 0; i < missing.size(); ++i) {
      ranks += (i ? ", " : "") + std::to_string(missing[i]);
    }
    C10_THROW_ERROR(DistBackendError,
                    c10::str(missing.size() == 1 ? "Rank " : "Ranks ", ranks,
                             " failed to pass monitoredBarrier in ", timeout.count(),
                             " ms (gang: rank 0 did not hear from ",
                             missing.size() == 1 ? "it" : "them", ")"));
  }
  std::vector<gang_work_t*> answers(size, nullptr);
  for (int r = 1; r < size; ++r) {
    check(gang_send(gang_, &token, 1, GANG_UINT8, r, kMonitorTag, &answers[r]),
          "monitored_barrier");
  }
  for (int r = 1; r < size; ++r) arrived(answers[r], "monitored_barrier");
}

// ---- sub-groups ----------------------------------------------------------

c10::intrusive_ptr<c10d::Backend> GangBackend::split(const c10::intrusive_ptr<c10d::Store>&,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), getRank());
  bool member = it != ranks.end();
  int color = member ? *std::min_element(ranks.begin(), ranks.end()) : GANG_COLOR_NONE;
  int key = member ? static_cast<int>(it - ranks.begin()) : 0;
  gang_t* child = nullptr;
  check(gang_split(gang_, color, key, &child), "split");
  if (child == nullptr) return nullptr;
  std::string name = opts ? options_name(*opts) : std::string();
  if (name.empty()) name = name_ + ".split";
  auto timeout = opts ? opts->timeout : options_->timeout;
  return c10::make_intrusive<GangBackend>(child, true, store_, timeout, name);
}

void GangBackend::split_out() {
  gang_t* none = nullptr;
  check(gang_split(gang_, GANG_COLOR_NONE, 0, &none), "split");
}

}  // namespace gang_torch
