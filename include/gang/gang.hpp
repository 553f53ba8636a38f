/*
 * gang.hpp - C++17 over gang's C ABI, header-only: RAII handles, an
 * exception carrying the status and message, collectives over pointers and
 * std::vector, works with wait(timeout), and the parallel topology as
 * value types. Everything here is inline code calling gang.h's functions,
 * so a program built with it depends on the C ABI alone and keeps working
 * on any later libgang.so.0.
 *
 *   gang::Gang g = gang::Gang::create();            // from the launch environment
 *   std::vector<float> grad(n, 1.0f);
 *   g.all_reduce(grad, gang::Op::Avg);
 *   gang::Work w = g.all_reduce_async(grad.data(), grad.data(), n, gang::Op::Sum);
 *   if (!w.wait_for(std::chrono::milliseconds(100))) { ...still running... }
 *
 * Errors throw gang::Error (a std::runtime_error) with status() and the
 * library's message.
 */
#ifndef GANG_HPP
#define GANG_HPP

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gang/gang.h"

namespace gang {

/** A failed call: the status and gang_last_error()'s message. */
class Error : public std::runtime_error {
 public:
  Error(gang_status_t status, const std::string& message)
      : std::runtime_error(std::string(gang_status_name(status)) + ": " + message),
        status_(status) {}
  gang_status_t status() const noexcept { return status_; }

 private:
  gang_status_t status_;
};

/** Throws Error unless `status` is GANG_OK or GANG_IN_PROGRESS. */
inline gang_status_t check(gang_status_t status) {
  if (status != GANG_OK && status != GANG_IN_PROGRESS) throw Error(status, gang_last_error());
  return status;
}

enum class Op : int {
  Sum = GANG_SUM,
  Prod = GANG_PROD,
  Min = GANG_MIN,
  Max = GANG_MAX,
  Avg = GANG_AVG,
};

/** The gang dtype of a C++ element type (float16 and bfloat16 have no C++17
 *  type: use the pointer overloads that take a gang_dtype_t). */
template <class T>
struct dtype_of;
#define GANG_HPP_DTYPE_(type, value) \
  template <>                        \
  struct dtype_of<type> {            \
    static constexpr gang_dtype_t value_ = value; \
  };
GANG_HPP_DTYPE_(int8_t, GANG_INT8)
GANG_HPP_DTYPE_(uint8_t, GANG_UINT8)
GANG_HPP_DTYPE_(int16_t, GANG_INT16)
GANG_HPP_DTYPE_(int32_t, GANG_INT32)
GANG_HPP_DTYPE_(uint32_t, GANG_UINT32)
GANG_HPP_DTYPE_(int64_t, GANG_INT64)
GANG_HPP_DTYPE_(uint64_t, GANG_UINT64)
GANG_HPP_DTYPE_(float, GANG_FLOAT32)
GANG_HPP_DTYPE_(double, GANG_FLOAT64)
GANG_HPP_DTYPE_(bool, GANG_BOOL)
#undef GANG_HPP_DTYPE_
template <class T>
constexpr gang_dtype_t dtype_v = dtype_of<T>::value_;

/** An operation in flight; destroying it waits for it. */
class Work {
 public:
  Work() = default;
  explicit Work(gang_work_t* w) noexcept : w_(w) {}
  Work(Work&& o) noexcept : w_(std::exchange(o.w_, nullptr)) {}
  Work& operator=(Work&& o) noexcept {
    if (this != &o) {
      reset();
      w_ = std::exchange(o.w_, nullptr);
    }
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { reset(); }

  /** Waits until the operation ends; throws Error if it failed. */
  void wait() {
    if (w_ != nullptr) check(gang_work_wait(w_, -1));
  }
  /** Waits at most `timeout`: true when it ended, false while it runs;
   *  throws Error if it failed. */
  bool wait_for(std::chrono::milliseconds timeout) {
    return w_ == nullptr || check(gang_work_wait(w_, timeout.count())) == GANG_OK;
  }
  /** Whether it ended, without waiting; throws Error if it failed. */
  bool test() { return w_ == nullptr || check(gang_work_test(w_)) == GANG_OK; }
  gang_work_t* get() const noexcept { return w_; }

 private:
  void reset() noexcept {
    if (w_ != nullptr) gang_work_destroy(w_);
    w_ = nullptr;
  }
  gang_work_t* w_ = nullptr;
};

/** What gang_create takes; empty strings and -1 mean the defaults. */
struct Options {
  std::string backend;      // "", "auto", "shm", "gloo", "nccl", "fake", ...
  std::string init_method;  // a store url or "env://"; "": the environment
  std::string name;         // "": "root"
  int rank = -1;            // -1: from the environment
  int size = -1;
  std::chrono::milliseconds timeout{0};  // 0: GANG_TIMEOUT_MS, else 600 s
  gang_device_type_t device_type = GANG_DEVICE_CPU;
  int device_index = -1;
};

/** Degrees of parallelism (gang_parallel_config_t as a value). */
struct ParallelConfig {
  int tp = 1, cp = 1, pp = 1;
  int dp = -1;  // -1: size / (tp * cp * pp)
  int ep = 1;
  int sdp = -1;       // -1: dp * cp
  std::string order;  // "": "tp-cp-pp-dp"

  gang_parallel_config_t c_config() const {
    gang_parallel_config_t c;
    gang_parallel_config_init(&c);
    c.tp = tp;
    c.cp = cp;
    c.pp = pp;
    c.dp = dp;
    c.ep = ep;
    c.sdp = sdp;
    c.order = order.empty() ? nullptr : order.c_str();
    return c;
  }
};

/** The ranks of `rank`'s gang on `axis` in a `size`-rank layout, computed
 *  without processes (gang_layout_ranks). */
inline std::vector<int> layout_ranks(int size, const ParallelConfig& config, gang_axis_t axis,
                                     int rank) {
  const gang_parallel_config_t c = config.c_config();
  std::vector<int> ranks(size > 0 ? static_cast<size_t>(size) : 0);
  size_t n = 0;
  check(gang_layout_ranks(size, &c, axis, rank, ranks.data(), ranks.size(), &n));
  ranks.resize(n);
  return ranks;
}

class Gangs;

/** A gang. Owning (made by create, fake, split) or a view of a gang owned
 *  elsewhere (Gang::view, Gangs::get). Moves, never copies. */
class Gang {
 public:
  Gang() = default;
  Gang(Gang&& o) noexcept : g_(std::exchange(o.g_, nullptr)), owned_(o.owned_) {}
  Gang& operator=(Gang&& o) noexcept {
    if (this != &o) {
      reset();
      g_ = std::exchange(o.g_, nullptr);
      owned_ = o.owned_;
    }
    return *this;
  }
  Gang(const Gang&) = delete;
  Gang& operator=(const Gang&) = delete;
  ~Gang() { reset(); }

  static Gang create(const Options& o = Options()) {
    gang_options_t c;
    gang_options_init(&c);
    if (!o.backend.empty()) c.backend = o.backend.c_str();
    if (!o.init_method.empty()) c.init_method = o.init_method.c_str();
    if (!o.name.empty()) c.name = o.name.c_str();
    c.rank = o.rank;
    c.size = o.size;
    c.timeout_ms = o.timeout.count();
    c.device_type = o.device_type;
    c.device_index = o.device_index;
    gang_t* g = nullptr;
    check(gang_create(&c, &g));
    return Gang(g, true);
  }
  /** One process standing in for rank `rank` of `size` (gang_create_fake). */
  static Gang fake(int rank, int size) {
    gang_t* g = nullptr;
    check(gang_create_fake(rank, size, &g));
    return Gang(g, true);
  }
  /** A view of a gang the caller keeps owning. */
  static Gang view(gang_t* g) noexcept { return Gang(g, false); }

  explicit operator bool() const noexcept { return g_ != nullptr; }
  gang_t* get() const noexcept { return g_; }
  int rank() const { return gang_rank(g_); }
  int size() const { return gang_size(g_); }
  std::string name() const { return gang_name(g_); }
  std::string backend() const { return gang_backend_name(g_); }
  std::chrono::milliseconds timeout() const {
    return std::chrono::milliseconds(gang_get_timeout(g_));
  }
  void set_timeout(std::chrono::milliseconds t) { check(gang_set_timeout(g_, t.count())); }
  void abort() { check(gang_abort(g_)); }

  /** The gang of the ranks that pass the same color, ordered by key; an
   *  empty Gang for a rank that passed GANG_COLOR_NONE. Collective. */
  Gang split(int color, int key) {
    gang_t* out = nullptr;
    check(gang_split(g_, color, key, &out));
    return Gang(out, true);
  }
  Gangs split_parallel(const ParallelConfig& config);

  // ---- collectives, blocking ----------------------------------------------
  template <class T>
  void all_reduce(const T* send, T* recv, size_t count, Op op) {
    check(gang_all_reduce(g_, send, recv, count, dtype_v<T>, static_cast<gang_op_t>(op), nullptr));
  }
  template <class T>
  void all_reduce(std::vector<T>& data, Op op = Op::Sum) {
    all_reduce(data.data(), data.data(), data.size(), op);
  }
  template <class T>
  void broadcast(T* buf, size_t count, int root) {
    check(gang_broadcast(g_, buf, count, dtype_v<T>, root, nullptr));
  }
  template <class T>
  void broadcast(std::vector<T>& data, int root) {
    broadcast(data.data(), data.size(), root);
  }
  /** Every rank's `send`, rank after rank. */
  template <class T>
  std::vector<T> all_gather(const std::vector<T>& send) {
    std::vector<T> all(send.size() * static_cast<size_t>(size()));
    check(gang_all_gather(g_, send.data(), all.data(), send.size(), dtype_v<T>, nullptr));
    return all;
  }
  /** This rank's 1/size() share of the reduction of `send` (whose length
   *  every rank passes alike, a multiple of size()). */
  template <class T>
  std::vector<T> reduce_scatter(const std::vector<T>& send, Op op = Op::Sum) {
    const size_t n = size() > 0 ? send.size() / static_cast<size_t>(size()) : 0;
    std::vector<T> mine(n);
    check(gang_reduce_scatter(g_, send.data(), mine.data(), n, dtype_v<T>,
                              static_cast<gang_op_t>(op), nullptr));
    return mine;
  }
  template <class T>
  void send(const T* buf, size_t count, int peer, int tag = 0) {
    check(gang_send(g_, buf, count, dtype_v<T>, peer, tag, nullptr));
  }
  template <class T>
  void send(const std::vector<T>& data, int peer, int tag = 0) {
    send(data.data(), data.size(), peer, tag);
  }
  template <class T>
  void recv(T* buf, size_t count, int peer, int tag = 0) {
    check(gang_recv(g_, buf, count, dtype_v<T>, peer, tag, nullptr));
  }
  template <class T>
  void recv(std::vector<T>& data, int peer, int tag = 0) {
    recv(data.data(), data.size(), peer, tag);
  }
  void barrier() { check(gang_barrier(g_, nullptr)); }
  /** `data` from `root` to every rank (any length; the others pass "" ). */
  std::string broadcast_bytes(const std::string& data, int root) {
    void* out = nullptr;
    size_t n = 0;
    check(gang_broadcast_bytes(g_, data.data(), data.size(), root, &out, &n));
    std::string s(static_cast<const char*>(out), n);
    gang_free(out);
    return s;
  }

  // ---- collectives, asynchronous: the buffers must outlive the Work --------
  template <class T>
  Work all_reduce_async(const T* send, T* recv, size_t count, Op op) {
    gang_work_t* w = nullptr;
    check(gang_all_reduce(g_, send, recv, count, dtype_v<T>, static_cast<gang_op_t>(op), &w));
    return Work(w);
  }
  template <class T>
  Work broadcast_async(T* buf, size_t count, int root) {
    gang_work_t* w = nullptr;
    check(gang_broadcast(g_, buf, count, dtype_v<T>, root, &w));
    return Work(w);
  }
  Work barrier_async() {
    gang_work_t* w = nullptr;
    check(gang_barrier(g_, &w));
    return Work(w);
  }

 private:
  Gang(gang_t* g, bool owned) noexcept : g_(g), owned_(owned) {}
  void reset() noexcept {
    if (owned_ && g_ != nullptr) gang_destroy(g_);
    g_ = nullptr;
  }
  gang_t* g_ = nullptr;
  bool owned_ = false;
};

/** The gangs of a parallel layout (gangs_split_parallel); they live as long
 *  as this object, and get() returns views of them. */
class Gangs {
 public:
  explicit Gangs(gangs_t* gs) noexcept : gs_(gs) {}
  Gangs(Gangs&& o) noexcept : gs_(std::exchange(o.gs_, nullptr)) {}
  Gangs& operator=(Gangs&& o) noexcept {
    if (this != &o) {
      if (gs_ != nullptr) gangs_destroy(gs_);
      gs_ = std::exchange(o.gs_, nullptr);
    }
    return *this;
  }
  Gangs(const Gangs&) = delete;
  Gangs& operator=(const Gangs&) = delete;
  ~Gangs() {
    if (gs_ != nullptr) gangs_destroy(gs_);
  }
  /** This rank's gang on `axis` (an empty view where the layout has none). */
  Gang get(gang_axis_t axis) const noexcept { return Gang::view(gangs_get(gs_, axis)); }

 private:
  gangs_t* gs_ = nullptr;
};

inline Gangs Gang::split_parallel(const ParallelConfig& config) {
  const gang_parallel_config_t c = config.c_config();
  gangs_t* out = nullptr;
  check(gangs_split_parallel(g_, &c, &out));
  return Gangs(out);
}

}  // namespace gang

#endif /* GANG_HPP */
