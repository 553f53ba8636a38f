#include "plugin/plugin_backend.h"

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "base/error.h"
#include "interop/firewall.h"
#include "interop/public_enums.h"
#include "store/store.h"

namespace gang::plugin {

using namespace core;  // the Backend interface this file implements

namespace {

// The public structs have no implicit padding, so a module built by another
// compiler reads the same offsets. Checked for LP64, the ABI gang ships on.
static_assert(sizeof(void*) != 8 ||
                  (offsetof(gang_backend_config_t, timeout_ms) == 32 &&
                   offsetof(gang_backend_config_t, host_id) == 40 &&
                   offsetof(gang_backend_config_t, parent) == 64 &&
                   offsetof(gang_backend_config_t, key) == 76 &&
                   sizeof(gang_backend_config_t) == 80),
              "gang_backend_config_t has padding");
static_assert(sizeof(void*) != 8 ||
                  (offsetof(gang_backend_op_t, channel) == 28 &&
                   offsetof(gang_backend_op_t, send) == 32 &&
                   offsetof(gang_backend_op_t, seq) == 80 &&
                   offsetof(gang_backend_op_t, stream) == 96 &&
                   offsetof(gang_backend_op_t, completion) == 104 &&
                   sizeof(gang_backend_op_t) == 112),
              "gang_backend_op_t has padding");
static_assert(sizeof(void*) != 8 ||
                  (offsetof(gang_backend_t, abi_version) == 8 &&
                   offsetof(gang_backend_t, name) == 16 &&
                   offsetof(gang_backend_t, flags) == 28 &&
                   offsetof(gang_backend_t, probe) == 32 &&
                   offsetof(gang_backend_t, split) == 120 &&
                   offsetof(gang_backend_t, device_index) == 128 &&
                   offsetof(gang_backend_t, shrink) == 136 &&
                   sizeof(gang_backend_t) == 144),
              "gang_backend_t has padding");
static_assert(sizeof(gang_backend_store_t) == 5 * sizeof(void*),
              "gang_backend_store_t has padding");

// The table as ABI version 1 first shipped. Fields appended later are read
// only when a module's struct_size covers them, so an older module of the
// same version stays loadable.
constexpr size_t kFirstTableSize =
    offsetof(gang_backend_t, abort) + sizeof(gang_backend_t::abort);

// Whether a module's table has the optional function `field`: its
// struct_size covers it (a field appended after the module was built reads
// as NULL) and it is set.
#define GANG_TABLE_HAS(table, field)                                      \
  ((table)->struct_size >=                                                \
       offsetof(gang_backend_t, field) + sizeof((table)->field) &&        \
   (table)->field != nullptr)

// Where a module writes a message. Longer ones are cut.
constexpr size_t kMessageBytes = 1024;

class Message {
 public:
  Message() { buf_[0] = '\0'; }
  char* data() { return buf_; }
  size_t size() const { return sizeof buf_; }
  // What the module wrote, cut at the end of the buffer should it have left
  // out the NUL.
  std::string text() {
    buf_[sizeof buf_ - 1] = '\0';
    return buf_;
  }

 private:
  char buf_[kMessageBytes];
};

// A module's failed call as gang::Error: its status and "<name>: <message>".
// Success statuses where an error was due, and values outside the list, are
// the module's bug: kInternal.
[[noreturn]] void fail_call(const gang_backend_t* table, const char* call,
                            gang_status_t pub, Message& message) {
  const std::string text = message.text();
  Status status = Status::kInternal;
  if (!interop::from_public(pub, &status) || status == Status::kOk ||
      status == Status::kInProgress) {
    fail(Status::kInternal, table->name, ": ", call,
         " returned the unexpected status ", static_cast<int>(pub),
         text.empty() ? "" : ": ", text);
  }
  if (text.empty()) {
    fail(status, table->name, ": ", call, " failed with ", status_name(status));
  }
  fail(status, table->name, ": ", text);
}

// For calls that either succeed or fail.
void check_call(const gang_backend_t* table, const char* call,
                gang_status_t pub, Message& message) {
  if (pub != GANG_OK) fail_call(table, call, pub, message);
}

// test() and wait(): whether the work ended; throws its error.
bool ended(const gang_backend_t* table, const char* call, gang_status_t pub,
           Message& message) {
  if (pub == GANG_OK) return true;
  if (pub == GANG_IN_PROGRESS) return false;
  fail_call(table, call, pub, message);
}

// ---- enums, through tables (switches the compiler checks for gaps) ----------

// The device types the table's bits name, in the order gang knows them.
std::vector<DeviceType> devices_of(uint32_t bits) {
  std::vector<DeviceType> devices;
  for (DeviceType d : {DeviceType::kCpu, DeviceType::kCuda}) {
    if (bits & (uint32_t{1} << interop::to_public(d))) devices.push_back(d);
  }
  return devices;
}

Capabilities capabilities_of(uint32_t flags) {
  Capabilities caps;
  caps.host_memory = (flags & GANG_BACKEND_HOST_MEMORY) != 0;
  caps.tagged_p2p = (flags & GANG_BACKEND_TAGGED_P2P) != 0;
  caps.stream_ordered = (flags & GANG_BACKEND_STREAM_ORDERED) != 0;
  caps.emulates_peers = (flags & GANG_BACKEND_EMULATES_PEERS) != 0;
  return caps;
}

// steady_clock is CLOCK_MONOTONIC on Linux (libstdc++ and libc++ alike), the
// clock the header promises modules.
int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

void translate(const Operation& op, gang_backend_op_t* out) {
  const CollectiveArgs& a = op.args;
  const OpInfo& info = op_info(a.kind);
  *out = gang_backend_op_t{};
  out->struct_size = sizeof *out;
  out->kind = interop::to_public(a.kind);
  out->dtype = interop::to_public(a.dtype);
  // The header promises fixed values where a field does not apply, so a
  // module can hash or log the whole struct.
  out->op = info.reducing ? interop::to_public(a.op) : GANG_SUM;
  out->root = info.rooted || info.p2p ? a.root : 0;
  out->tag = info.p2p ? a.tag : 0;
  out->channel = interop::to_public(op.channel);
  out->send = a.send;
  out->recv = a.recv;
  out->count = a.count;
  if (!a.send_counts.empty() && !a.recv_counts.empty() &&
      a.send_counts.size() != a.recv_counts.size()) {
    fail(Status::kInternal, "plugin: ", op_api_name(a.kind), " has ",
         a.send_counts.size(), " send counts but ", a.recv_counts.size(),
         " receive counts");
  }
  out->send_counts = a.send_counts.empty() ? nullptr : a.send_counts.data();
  out->recv_counts = a.recv_counts.empty() ? nullptr : a.recv_counts.data();
  out->ncounts =
      a.recv_counts.empty() ? a.send_counts.size() : a.recv_counts.size();
  out->seq = op.seq;
  out->deadline_ns = to_ns(op.deadline);
  out->stream = op.stream;
  out->completion = op.stream_completion ? GANG_BACKEND_COMPLETION_STREAM
                                         : GANG_BACKEND_COMPLETION_HOST;
  out->reserved = 0;
}

// ---- the store, as callbacks ------------------------------------------------

// Writes a...: into (err, err_len), cut to fit, without allocating (it runs
// while an allocation may just have failed).
void put_message(char* err, size_t err_len, const char* a, const char* b = "") {
  if (err == nullptr || err_len == 0) return;
  size_t n = 0;
  for (const char* part : {a, b}) {
    while (*part != '\0' && n + 1 < err_len) err[n++] = *part++;
  }
  err[n] = '\0';
}

// The exception firewall of every callback: nothing thrown crosses into the
// module, whatever language it is written in.
template <typename F>
gang_status_t firewall(char* err, size_t err_len, F&& body) noexcept {
  try {
    body();
    return GANG_OK;
  } catch (...) {
    return interop::caught(
        [&](const char* a, const char* b) { put_message(err, err_len, a, b); });
  }
}

store::Store& store_of(void* ctx) {
  if (ctx == nullptr) fail(Status::kInvalidArgument, "store: ctx is NULL");
  return *static_cast<store::Store*>(ctx);
}

const char* key_of(const char* key, const char* call) {
  if (key == nullptr)
    fail(Status::kInvalidArgument, "store ", call, ": key is NULL");
  return key;
}

gang_status_t store_set(void* ctx, const char* key, const void* data,
                        size_t len, char* err, size_t err_len) {
  return firewall(err, err_len, [&] {
    store::Store& s = store_of(ctx);
    key_of(key, "set");
    if (data == nullptr && len != 0) {
      fail(Status::kInvalidArgument, "store set: key \"", key, "\": data is ",
           "NULL but len is ", len);
    }
    const auto* bytes = static_cast<const uint8_t*>(data);
    s.set(key, store::Bytes(bytes, bytes + len));
  });
}

gang_status_t store_get(void* ctx, const char* key, int64_t timeout_ms,
                        void** data, size_t* len, char* err, size_t err_len) {
  if (data != nullptr) *data = nullptr;
  if (len != nullptr) *len = 0;
  return firewall(err, err_len, [&] {
    store::Store& s = store_of(ctx);
    key_of(key, "get");
    if (data == nullptr || len == nullptr) {
      fail(Status::kInvalidArgument, "store get: key \"", key,
           "\": data or len is NULL");
    }
    if (timeout_ms == 0) {
      fail(Status::kInvalidArgument, "store get: key \"", key,
           "\": a timeout of 0 ms (pass > 0, or < 0 for the gang's)");
    }
    const store::Bytes value =
        s.get(key, timeout_ms < 0 ? s.timeout() : Millis(timeout_ms));
    // Never NULL on success, so callers can tell it from a miss.
    void* copy = std::malloc(value.empty() ? 1 : value.size());
    if (copy == nullptr) {
      fail(Status::kNoMemory, "store get: key \"", key, "\": cannot allocate ",
           value.size(), " bytes");
    }
    if (!value.empty()) std::memcpy(copy, value.data(), value.size());
    *data = copy;
    *len = value.size();
  });
}

gang_status_t store_add(void* ctx, const char* key, int64_t delta, int64_t* out,
                        char* err, size_t err_len) {
  return firewall(err, err_len, [&] {
    store::Store& s = store_of(ctx);
    const int64_t sum = s.add(key_of(key, "add"), delta);
    if (out != nullptr) *out = sum;
  });
}

gang_status_t store_remove(void* ctx, const char* key, char* err,
                           size_t err_len) {
  return firewall(err, err_len,
                  [&] { store_of(ctx).remove(key_of(key, "remove")); });
}

}  // namespace

// ---- the instance -----------------------------------------------------------

// One module instance with everything its config points to, which the header
// promises stays valid until destroy. Works share it, so the instance is
// destroyed only after the backend and its last work are gone, whatever
// order the core drops them in; and it holds the module, so the code it
// calls stays mapped until then.
struct PluginBackend::Instance {
  Instance() = default;
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance() {
    if (handle != nullptr) table->destroy(handle);
  }

  const gang_backend_t* table = nullptr;
  std::shared_ptr<void> module;
  std::shared_ptr<store::Store> store;
  std::string host_id;
  std::string gang_name;
  gang_backend_store_t c_store{};
  gang_backend_config_t c_config{};
  void* handle = nullptr;
};

namespace {

class PluginWork final : public BackendWork {
 public:
  PluginWork(std::shared_ptr<PluginBackend::Instance> instance, void* work)
      : instance_(std::move(instance)), work_(work) {}
  ~PluginWork() override { instance_->table->work_free(work_); }
  PluginWork(const PluginWork&) = delete;
  PluginWork& operator=(const PluginWork&) = delete;

  bool test() override {
    Message m;
    const gang_backend_t* t = instance_->table;
    return ended(t, "test", t->test(work_, m.data(), m.size()), m);
  }

  bool wait(Clock::time_point until) override {
    Message m;
    const gang_backend_t* t = instance_->table;
    return ended(t, "wait", t->wait(work_, to_ns(until), m.data(), m.size()),
                 m);
  }

 private:
  std::shared_ptr<PluginBackend::Instance> instance_;
  void* work_;
};

}  // namespace

PluginBackend::PluginBackend(const gang_backend_t* table,
                             std::shared_ptr<void> module,
                             const BackendConfig& config)
    : PluginBackend(table, std::move(module), config, true) {}

PluginBackend::PluginBackend(const gang_backend_t* table,
                             std::shared_ptr<void> module,
                             const BackendConfig& config, bool create)
    : instance_(std::make_shared<Instance>()),
      caps_(capabilities_of(table->flags)) {
  caps_.native_split = GANG_TABLE_HAS(table, split);
  Instance& in = *instance_;
  in.table = table;
  in.module = std::move(module);
  in.store = config.store;
  in.host_id = config.host_id;
  // BackendConfig does not carry the gang's name yet; the header allows "".
  in.gang_name = "";
  if (in.store) {
    in.c_store.ctx = in.store.get();
    in.c_store.set = store_set;
    in.c_store.get = store_get;
    in.c_store.add = store_add;
    in.c_store.remove = store_remove;
  }

  gang_backend_config_t& c = in.c_config;
  c.struct_size = sizeof c;
  c.rank = config.rank;
  c.size = config.size;
  c.local_rank = config.local_rank;
  c.local_size = config.local_size;
  c.device_type = interop::to_public(config.device_type);
  c.device_index = config.device_index;
  c.timeout_ms = config.timeout.count();
  c.host_id = in.host_id.c_str();
  c.gang_name = in.gang_name.c_str();
  c.store = in.store ? &in.c_store : nullptr;
  // Only an instance of this very module is something it can use.
  const auto* parent = dynamic_cast<const PluginBackend*>(config.parent);
  c.parent = parent != nullptr && parent->table() == table ? parent->handle()
                                                           : nullptr;
  c.color = config.color;
  c.key = config.key;
  if (!create) return;

  Message m;
  void* handle = nullptr;
  check_call(table, "create", table->create(&c, &handle, m.data(), m.size()),
             m);
  if (handle == nullptr) {
    fail(Status::kInternal, table->name,
         ": create returned GANG_OK without an instance");
  }
  in.handle = handle;
}

PluginBackend::~PluginBackend() = default;

const char* PluginBackend::name() const { return instance_->table->name; }

const gang_backend_t* PluginBackend::table() const { return instance_->table; }

void* PluginBackend::handle() const { return instance_->handle; }

int PluginBackend::device_index() const {
  const gang_backend_t* t = instance_->table;
  return GANG_TABLE_HAS(t, device_index) ? t->device_index(instance_->handle) : -1;
}

bool PluginBackend::supports(ReduceOp op, DType dtype) const {
  return instance_->table->supports(instance_->handle, interop::to_public(op), interop::to_public(dtype)) !=
         0;
}

BackendWorkPtr PluginBackend::post(const Operation& op) {
  return post_ops(&op, 1);
}

BackendWorkPtr PluginBackend::post_group(const std::vector<Operation>& ops) {
  if (ops.empty()) return nullptr;
  return post_ops(ops.data(), ops.size());
}

BackendWorkPtr PluginBackend::post_ops(const Operation* ops, size_t n) {
  const gang_backend_t* t = instance_->table;
  // One operation, the blocking hot path, needs no allocation.
  gang_backend_op_t one;
  std::vector<gang_backend_op_t> many;
  gang_backend_op_t* c_ops = &one;
  if (n > 1) {
    many.resize(n);
    c_ops = many.data();
  }
  for (size_t i = 0; i < n; ++i) translate(ops[i], &c_ops[i]);

  Message m;
  void* work = nullptr;
  check_call(t, "post",
             t->post(instance_->handle, c_ops, n, &work, m.data(), m.size()),
             m);
  if (work == nullptr) return nullptr;
  try {
    return std::make_unique<PluginWork>(instance_, work);
  } catch (...) {
    // No memory to track a work in flight: the error fails the gang, which
    // aborts the backend anyway, so abort first and free the work rather
    // than leak it.
    t->abort(instance_->handle);
    t->work_free(work);
    throw;
  }
}

Status PluginBackend::poll_error(std::string* message) {
  const gang_backend_t* t = instance_->table;
  if (t->poll_error == nullptr) return Status::kOk;
  Message m;
  const gang_status_t pub =
      t->poll_error(instance_->handle, m.data(), m.size());
  if (pub == GANG_OK) return Status::kOk;
  Status status = Status::kInternal;
  std::string text = m.text();
  if (!interop::from_public(pub, &status) || status == Status::kInProgress) {
    status = Status::kInternal;
    text = str_cat("poll_error returned the unexpected status ",
                   static_cast<int>(pub), text.empty() ? "" : ": ", text);
  } else if (text.empty()) {
    text = str_cat("poll_error reported ", status_name(status));
  }
  if (message != nullptr) *message = str_cat(t->name, ": ", text);
  return status;
}

std::unique_ptr<Backend> PluginBackend::split(const BackendConfig& config) {
  const gang_backend_t* t = instance_->table;
  if (!caps_.native_split) {
    fail(Status::kUnsupported, t->name, ": the module has no native split");
  }
  std::unique_ptr<PluginBackend> child(
      new PluginBackend(t, instance_->module, config, false));
  gang_backend_config_t& c = child->instance_->c_config;
  c.parent = instance_->handle;
  const bool member = config.color >= 0;
  if (!member) {
    c.rank = -1;
    c.size = 0;
    c.store = nullptr;
  }
  Message m;
  void* handle = nullptr;
  check_call(t, "split",
             t->split(instance_->handle, &c, &handle, m.data(), m.size()), m);
  if (!member) {
    if (handle != nullptr) t->destroy(handle);
    return nullptr;
  }
  if (handle == nullptr) {
    fail(Status::kInternal, t->name,
         ": split returned GANG_OK without an instance");
  }
  child->instance_->handle = handle;
  return child;
}

void PluginBackend::finalize() {
  const gang_backend_t* t = instance_->table;
  if (t->finalize != nullptr) t->finalize(instance_->handle);
}

void PluginBackend::abort() noexcept {
  instance_->table->abort(instance_->handle);
}

// ---- the registry entry -----------------------------------------------------

BackendInfo make_plugin_info(const gang_backend_t* table,
                             std::shared_ptr<void> module,
                             const std::string& path) {
  if (table == nullptr) {
    fail(Status::kUnavailable, path, ": ", GANG_BACKEND_ENTRY,
         " returned NULL");
  }
  // The version first: a module of another version may have another layout,
  // and its version is the more useful thing to report. The field sits at
  // the same offset in every version.
  if (table->struct_size <
      offsetof(gang_backend_t, abi_version) + sizeof table->abi_version) {
    fail(Status::kUnavailable, path, ": its table is ", table->struct_size,
         " bytes, too small to hold an ABI version");
  }
  if (table->abi_version != GANG_BACKEND_ABI_VERSION) {
    fail(Status::kUnavailable, path, ": built for backend ABI version ",
         table->abi_version, ", but this library speaks version ",
         GANG_BACKEND_ABI_VERSION, " (rebuild the module against it)");
  }
  if (table->struct_size < kFirstTableSize) {
    fail(Status::kUnavailable, path, ": its table is ", table->struct_size,
         " bytes, smaller than the ", kFirstTableSize, " of ABI version ",
         GANG_BACKEND_ABI_VERSION);
  }
  if (table->name == nullptr || table->name[0] == '\0') {
    fail(Status::kUnavailable, path, ": its table has no name");
  }
  const std::pair<bool, const char*> mandatory[] = {
      {table->create != nullptr, "create"},
      {table->destroy != nullptr, "destroy"},
      {table->supports != nullptr, "supports"},
      {table->post != nullptr, "post"},
      {table->test != nullptr, "test"},
      {table->wait != nullptr, "wait"},
      {table->work_free != nullptr, "work_free"},
      {table->abort != nullptr, "abort"},
  };
  for (const auto& [present, entry] : mandatory) {
    if (!present) {
      fail(Status::kUnavailable, path, ": its table has no ", entry,
           " function");
    }
  }
  std::vector<DeviceType> devices = devices_of(table->device_types);
  if (devices.empty()) {
    fail(Status::kUnavailable, path,
         ": serves no device type this library knows (device_types 0x",
         std::hex, table->device_types, ")");
  }

  BackendInfo info;
  info.name = table->name;
  info.devices = std::move(devices);
  info.priority = table->priority;
  info.origin = path;
  info.probe = [table, path, keep = module]() -> std::string {
    if (table->probe == nullptr) return "";
    Message why;
    if (table->probe(why.data(), why.size()) == 0) return "";
    const std::string text = why.text();
    return str_cat(path, ": ",
                   text.empty() ? "its probe failed without a reason" : text);
  };
  info.create = [table, keep = std::move(module)](
                    const BackendConfig& c) -> std::unique_ptr<Backend> {
    return std::make_unique<PluginBackend>(table, keep, c);
  };
  return info;
}

}  // namespace gang::plugin
