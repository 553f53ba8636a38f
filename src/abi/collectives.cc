// The collectives: each fills one CollectiveArgs and issues it.
#include "abi/shim.h"

using gang::Status;
using gang::abi::issue;
using gang::abi::out_arg;
using gang::abi::pin_gang;
using gang::abi::to_dtype;
using gang::abi::to_op;
using gang::core::CollectiveArgs;
using gang::core::OpKind;

namespace {

CollectiveArgs make(OpKind kind, const void* send, void* recv, size_t count,
                    gang_dtype_t dtype, const char* api) {
  CollectiveArgs a;
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = to_dtype(dtype, api);
  return a;
}

// Copies a caller's count array, so asynchronous work owns its counts.
std::vector<size_t> counts(const size_t* p, size_t n, const char* api,
                           const char* name) {
  if (p == nullptr && n != 0) {
    gang::fail(Status::kInvalidArgument, api, ": ", name, " is NULL with ", n,
               " entries");
  }
  return std::vector<size_t>(p, p + n);
}

}  // namespace

extern "C" {

GANG_API gang_status_t gang_all_reduce(gang_t* g, const void* send, void* recv,
                                       size_t count, gang_dtype_t dtype,
                                       gang_op_t op, gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_reduce";
  auto a = make(OpKind::kAllReduce, send, recv, count, dtype, api);
  a.op = to_op(op, api);
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_reduce(gang_t* g, const void* send, void* recv,
                                   size_t count, gang_dtype_t dtype,
                                   gang_op_t op, int root, gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_reduce";
  auto a = make(OpKind::kReduce, send, recv, count, dtype, api);
  a.op = to_op(op, api);
  a.root = root;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_broadcast(gang_t* g, void* buf, size_t count,
                                      gang_dtype_t dtype, int root,
                                      gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_broadcast";
  auto a = make(OpKind::kBroadcast, buf, buf, count, dtype, api);
  a.root = root;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_gather(gang_t* g, const void* send, void* recv,
                                       size_t count, gang_dtype_t dtype,
                                       gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_gather";
  return issue(g, make(OpKind::kAllGather, send, recv, count, dtype, api), work,
               api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_gatherv(gang_t* g, const void* send,
                                        size_t send_count, void* recv,
                                        const size_t* recv_counts,
                                        size_t ncounts, gang_dtype_t dtype,
                                        gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_gatherv";
  auto a = make(OpKind::kAllGatherV, send, recv, send_count, dtype, api);
  a.recv_counts = counts(recv_counts, ncounts, api, "recv_counts");
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_gather(gang_t* g, const void* send, void* recv,
                                   size_t count, gang_dtype_t dtype, int root,
                                   gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_gather";
  auto a = make(OpKind::kGather, send, recv, count, dtype, api);
  a.root = root;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_scatter(gang_t* g, const void* send, void* recv,
                                    size_t count, gang_dtype_t dtype, int root,
                                    gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_scatter";
  auto a = make(OpKind::kScatter, send, recv, count, dtype, api);
  a.root = root;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_reduce_scatter(gang_t* g, const void* send,
                                           void* recv, size_t recv_count,
                                           gang_dtype_t dtype, gang_op_t op,
                                           gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_reduce_scatter";
  auto a = make(OpKind::kReduceScatter, send, recv, recv_count, dtype, api);
  a.op = to_op(op, api);
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_reduce_scatterv(gang_t* g, const void* send,
                                            void* recv,
                                            const size_t* recv_counts,
                                            size_t ncounts, gang_dtype_t dtype,
                                            gang_op_t op, gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_reduce_scatterv";
  auto a = make(OpKind::kReduceScatterV, send, recv, 0, dtype, api);
  a.op = to_op(op, api);
  a.recv_counts = counts(recv_counts, ncounts, api, "recv_counts");
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_to_all(gang_t* g, const void* send, void* recv,
                                       size_t count, gang_dtype_t dtype,
                                       gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_to_all";
  return issue(g, make(OpKind::kAllToAll, send, recv, count, dtype, api), work,
               api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_to_allv(gang_t* g, const void* send,
                                        const size_t* send_counts, size_t nsend,
                                        void* recv, const size_t* recv_counts,
                                        size_t nrecv, gang_dtype_t dtype,
                                        gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_to_allv";
  auto a = make(OpKind::kAllToAllV, send, recv, 0, dtype, api);
  a.send_counts = counts(send_counts, nsend, api, "send_counts");
  a.recv_counts = counts(recv_counts, nrecv, api, "recv_counts");
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_barrier(gang_t* g, gang_work_t** work) {
  GANG_ABI_TRY
  CollectiveArgs a;
  a.kind = OpKind::kBarrier;
  return issue(g, std::move(a), work, "gang_barrier");
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_send(gang_t* g, const void* buf, size_t count,
                                 gang_dtype_t dtype, int peer, int tag,
                                 gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_send";
  auto a = make(OpKind::kSend, buf, nullptr, count, dtype, api);
  a.root = peer;
  a.tag = tag;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_recv(gang_t* g, void* buf, size_t count,
                                 gang_dtype_t dtype, int peer, int tag,
                                 gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_recv";
  auto a = make(OpKind::kRecv, nullptr, buf, count, dtype, api);
  a.root = peer;
  a.tag = tag;
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_recv_any(gang_t* g, void* buf, size_t count,
                                     gang_dtype_t dtype, int tag, int* source,
                                     gang_work_t** work) {
  GANG_ABI_TRY
  static const char* const api = "gang_recv_any";
  auto a = make(OpKind::kRecv, nullptr, buf, count, dtype, api);
  a.root = gang::core::kAnySource;
  a.tag = tag;
  a.source = out_arg(source, api, "source");
  return issue(g, std::move(a), work, api);
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_group_start(gang_t* g) {
  GANG_ABI_TRY
  pin_gang(g, "gang_group_start")->group_start();
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_group_end(gang_t* g, gang_work_t** work) {
  GANG_ABI_TRY
  if (work) *work = nullptr;
  const auto impl = pin_gang(g, "gang_group_end");
  if (work) {
    auto w = impl->group_end(true);
    if (w) *work = gang::abi::wrap_work(std::move(w));
    return GANG_OK;
  }
  gang::core::Gang::Blocking blocking(*impl);
  auto w = impl->group_end(false);
  return w ? gang::abi::wait_work(*w, gang::core::Millis(-1)) : GANG_OK;
  GANG_ABI_CATCH
}

// ---- byte payloads and helpers --------------------------------------------

GANG_API gang_status_t gang_broadcast_bytes(gang_t* g, const void* data,
                                            size_t len, int root, void** out,
                                            size_t* out_len) {
  GANG_ABI_TRY
  static const char* const api = "gang_broadcast_bytes";
  const auto impl = pin_gang(g, api);
  out_arg(out, api, "out");
  out_arg(out_len, api, "out_len");
  *out = nullptr;
  *out_len = 0;
  const auto bytes = impl->broadcast_bytes(data, len, root);
  *out = bytes.data;
  *out_len = bytes.size;
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_gather_bytes(gang_t* g, const void* data,
                                             size_t len, void** out,
                                             size_t* lens, size_t nlens) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_gather_bytes";
  const auto impl = pin_gang(g, api);
  out_arg(out, api, "out");
  *out = nullptr;
  *out = impl->all_gather_bytes(data, len, lens, nlens).data;
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_send_bytes(gang_t* g, const void* data, size_t len,
                                       int peer, int tag) {
  GANG_ABI_TRY
  pin_gang(g, "gang_send_bytes")->send_bytes(data, len, peer, tag);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_recv_bytes(gang_t* g, int peer, int tag, void** out,
                                       size_t* out_len) {
  GANG_ABI_TRY
  static const char* const api = "gang_recv_bytes";
  const auto impl = pin_gang(g, api);
  out_arg(out, api, "out");
  out_arg(out_len, api, "out_len");
  *out = nullptr;
  *out_len = 0;
  const auto bytes = impl->recv_bytes(peer, tag);
  *out = bytes.data;
  *out_len = bytes.size;
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_broadcast_flag(gang_t* g, int flag, int root,
                                           int* out) {
  GANG_ABI_TRY
  static const char* const api = "gang_broadcast_flag";
  const auto impl = pin_gang(g, api);
  int* dst = out_arg(out, api, "out");  // checked before any traffic
  *dst = impl->broadcast_flag(flag, root);
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_all_sum(gang_t* g, double value, double* out) {
  GANG_ABI_TRY
  static const char* const api = "gang_all_sum";
  const auto impl = pin_gang(g, api);
  double* dst = out_arg(out, api, "out");  // checked before any traffic
  *dst = impl->all_sum(value);
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
