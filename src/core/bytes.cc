// Byte payloads whose size only the sender knows, and the small helpers of
// training code. Each is a short sequence of ordinary operations: a length
// first, then the bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/control_channel.h"
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

// No buffer holds more than PTRDIFF_MAX bytes: a longer payload is an
// invalid argument, refused by every rank alike (they all know it).
void check_length(const char* api, const char* what, uint64_t n) {
  if (n > static_cast<uint64_t>(PTRDIFF_MAX)) {
    fail(Status::kInvalidArgument, api, ": ", what, " ", n,
         " is more than any buffer holds (PTRDIFF_MAX, ", PTRDIFF_MAX, ")");
  }
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
  Buffer out;
  uint64_t n = is_root ? len : 0;
  control(api, [&](Clock::time_point deadline) {
    control_->broadcast(&n, 1, DType::kUInt64, root, deadline);
    // Every rank has the root's length now, so all refuse an impossible
    // one alike, and the gang stays usable (nothing else moved).
    check_length(api, "root's len", n);
    out = allocate(n, api);
    if (is_root && n != 0) std::memcpy(out.get(), data, n);
    control_->broadcast(out.get(), n, DType::kUInt8, root, deadline);
  });
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
  Buffer out;
  size_t total = 0;
  std::vector<uint64_t> all;
  control(api, [&](Clock::time_point deadline) {
    all = control_->all_gather_words(len, size_, deadline);
    std::vector<size_t> counts;
    for (size_t r = 0; r < all.size(); ++r) {
      check_length(api, str_cat("rank ", r, "'s len").c_str(), all[r]);
      counts.push_back(static_cast<size_t>(all[r]));
      total += static_cast<size_t>(all[r]);
      check_length(api, "the lens' sum", total);
    }
    out = allocate(total, api);
    control_->all_gatherv(data, len, out.get(), std::move(counts), deadline);
  });
  for (size_t i = 0; i < all.size(); ++i) lens[i] = static_cast<size_t>(all[i]);
  return {out.release(), total};
}

// Checks peer and tag as gang_send / gang_recv would.
void Gang::check_p2p_bytes(OpKind kind, int peer, int tag) {
  CollectiveArgs a;
  a.kind = kind;
  a.dtype = DType::kUInt8;
  a.root = peer;
  a.tag = tag;
  check(a);
}

void Gang::send_bytes(const void* data, size_t len, int peer, int tag) {
  static const char* const api = "gang_send_bytes";
  if (data == nullptr && len != 0) {
    fail(Status::kInvalidArgument, api, ": data is NULL with len ", len);
  }
  check_p2p_bytes(OpKind::kSend, peer, tag);
  control(api, [&](Clock::time_point deadline) {
    const uint64_t n = len;
    control_->send(&n, sizeof n, peer, tag, deadline);
    // The receiver has the length too, and refuses it alike.
    check_length(api, "len", n);
    if (len != 0) control_->send(data, len, peer, tag, deadline);
  });
}

HostBytes Gang::recv_bytes(int peer, int tag) {
  static const char* const api = "gang_recv_bytes";
  check_p2p_bytes(OpKind::kRecv, peer, tag);
  Buffer out;
  uint64_t n = 0;
  control(api, [&](Clock::time_point deadline) {
    control_->recv(&n, sizeof n, peer, tag, deadline);
    check_length(api, str_cat("rank ", peer, "'s len").c_str(), n);
    out = allocate(n, api);
    if (n != 0) control_->recv(out.get(), n, peer, tag, deadline);
  });
  return {out.release(), static_cast<size_t>(n)};
}

int Gang::broadcast_flag(int flag, int root) {
  static const char* const api = "gang_broadcast_flag";
  check_root(api, root, size_);
  int32_t v = flag != 0 ? 1 : 0;
  control(api, [&](Clock::time_point deadline) {
    control_->broadcast(&v, 1, DType::kInt32, root, deadline);
  });
  return v;
}

double Gang::all_sum(double value) {
  static const char* const api = "gang_all_sum";
  std::vector<double> all(static_cast<size_t>(size_));
  control(api, [&](Clock::time_point deadline) {
    control_->all_gather(&value, all.data(), 1, DType::kFloat64, deadline);
  });
  // Summed in rank order, so every rank gets the same bits.
  double sum = 0;
  for (double v : all) sum += v;
  return sum;
}

}  // namespace gang::core
