// Byte payloads whose size only the sender knows, and the small helpers of
// training code. Each is a short sequence of ordinary operations: a length
// first, then the bytes.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/gang.h"

namespace gang::core {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

// malloc(0) may return NULL; callers always get a pointer they can free.
Buffer allocate(size_t n, const char* api) {
  Buffer b(std::malloc(n == 0 ? 1 : n));
  if (!b) fail(Status::kNoMemory, api, ": cannot allocate ", n, " bytes");
  return b;
}

void check_root(const char* api, int root, int size) {
  if (root < 0 || root >= size) {
    fail(Status::kInvalidArgument, api, ": root ", root,
         " is out of range for a gang of size ", size);
  }
}

}  // namespace

HostBytes Gang::broadcast_bytes(const void* data, size_t len, int root) {
  static const char* const api = "gang_broadcast_bytes";
  check_root(api, root, size_);
  const bool is_root = root == rank_;
  if (is_root && data == nullptr && len != 0) {
    fail(Status::kInvalidArgument, api, ": data is NULL with len ", len);
  }
  uint64_t n = is_root ? len : 0;
  CollectiveArgs a;
  a.kind = OpKind::kBroadcast;
  a.recv = &n;
  a.count = 1;
  a.dtype = DType::kUInt64;
  a.root = root;
  run_blocking(a);

  Buffer out = allocate(n, api);
  if (is_root && n != 0) std::memcpy(out.get(), data, n);
  a.recv = out.get();
  a.count = n;
  a.dtype = DType::kUInt8;
  run_blocking(a);
  return {out.release(), static_cast<size_t>(n)};
}

HostBytes Gang::all_gather_bytes(const void* data, size_t len, size_t* lens,
                                 size_t nlens) {
  static const char* const api = "gang_all_gather_bytes";
  if (data == nullptr && len != 0) {
    fail(Status::kInvalidArgument, api, ": data is NULL with len ", len);
  }
  if (lens == nullptr) fail(Status::kInvalidArgument, api, ": lens is NULL");
  if (nlens != static_cast<size_t>(size_)) {
    fail(Status::kInvalidArgument, api, ": nlens ", nlens,
         " differs from the gang size ", size_);
  }
  const std::vector<uint64_t> all = all_gather_word(len);

  CollectiveArgs v;
  v.kind = OpKind::kAllGatherV;
  v.dtype = DType::kUInt8;
  v.send = data;
  v.count = len;
  size_t total = 0;
  for (uint64_t n : all) {
    v.recv_counts.push_back(static_cast<size_t>(n));
    total += static_cast<size_t>(n);
  }
  Buffer out = allocate(total, api);
  v.recv = out.get();
  run_blocking(v);
  for (size_t i = 0; i < all.size(); ++i) lens[i] = static_cast<size_t>(all[i]);
  return {out.release(), total};
}

void Gang::send_bytes(const void* data, size_t len, int peer, int tag) {
  if (data == nullptr && len != 0) {
    fail(Status::kInvalidArgument, "gang_send_bytes: data is NULL with len ",
         len);
  }
  uint64_t n = len;
  CollectiveArgs a;
  a.kind = OpKind::kSend;
  a.send = &n;
  a.count = 1;
  a.dtype = DType::kUInt64;
  a.root = peer;
  a.tag = tag;
  run_blocking(a);
  if (len == 0) return;
  a.send = data;
  a.count = len;
  a.dtype = DType::kUInt8;
  run_blocking(a);
}

HostBytes Gang::recv_bytes(int peer, int tag) {
  uint64_t n = 0;
  CollectiveArgs a;
  a.kind = OpKind::kRecv;
  a.recv = &n;
  a.count = 1;
  a.dtype = DType::kUInt64;
  a.root = peer;
  a.tag = tag;
  run_blocking(a);
  Buffer out = allocate(n, "gang_recv_bytes");
  if (n != 0) {
    a.recv = out.get();
    a.count = n;
    a.dtype = DType::kUInt8;
    run_blocking(a);
  }
  return {out.release(), static_cast<size_t>(n)};
}

std::vector<uint64_t> Gang::all_gather_word(uint64_t mine) {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  CollectiveArgs a;
  a.kind = OpKind::kAllGather;
  a.send = &mine;
  a.recv = all.data();
  a.count = 1;
  a.dtype = DType::kUInt64;
  run_blocking(a);
  return all;
}

int Gang::broadcast_flag(int flag, int root) {
  check_root("gang_broadcast_flag", root, size_);
  int32_t v = flag != 0 ? 1 : 0;
  CollectiveArgs a;
  a.kind = OpKind::kBroadcast;
  a.recv = &v;
  a.count = 1;
  a.dtype = DType::kInt32;
  a.root = root;
  run_blocking(a);
  return v;
}

double Gang::all_sum(double value) {
  double out = 0;
  CollectiveArgs a;
  a.kind = OpKind::kAllReduce;
  a.send = &value;
  a.recv = &out;
  a.count = 1;
  a.dtype = DType::kFloat64;
  a.op = ReduceOp::kSum;
  run_blocking(a);
  return out;
}

}  // namespace gang::core
