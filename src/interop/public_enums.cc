#include "interop/public_enums.h"

namespace gang::interop {

namespace {

// One row per pair; lookups go either way. Each table has as many rows as
// the core enum has members (asserted), and the public side's gaps are the
// compiler's to find in the switches of to_public below.
template <typename Pub, typename Core>
struct Pair {
  Pub pub;
  Core core;
};

template <typename Pub, typename Core, size_t N>
bool find_core(const Pair<Pub, Core> (&table)[N], Pub pub, Core* out) {
  for (const auto& p : table) {
    if (p.pub == pub) {
      *out = p.core;
      return true;
    }
  }
  return false;
}

template <typename Pub, typename Core, size_t N>
Pub find_pub(const Pair<Pub, Core> (&table)[N], Core core, Pub otherwise) {
  for (const auto& p : table) {
    if (p.core == core) return p.pub;
  }
  return otherwise;
}

#define GANG_STATUS_PAIR_(name, value, msg) {name, static_cast<Status>(value)},
constexpr Pair<gang_status_t, Status> kStatuses[] = {GANG_STATUS_MAP(GANG_STATUS_PAIR_)};
#undef GANG_STATUS_PAIR_

constexpr Pair<gang_dtype_t, core::DType> kDTypes[] = {
    {GANG_INT8, core::DType::kInt8},         {GANG_UINT8, core::DType::kUInt8},
    {GANG_INT32, core::DType::kInt32},       {GANG_UINT32, core::DType::kUInt32},
    {GANG_INT64, core::DType::kInt64},       {GANG_UINT64, core::DType::kUInt64},
    {GANG_FLOAT16, core::DType::kFloat16},   {GANG_BFLOAT16, core::DType::kBFloat16},
    {GANG_FLOAT32, core::DType::kFloat32},   {GANG_FLOAT64, core::DType::kFloat64},
    {GANG_BOOL, core::DType::kBool},         {GANG_INT16, core::DType::kInt16},
};
static_assert(sizeof kDTypes / sizeof kDTypes[0] == static_cast<size_t>(core::DType::kInt16) + 1,
              "one row per DType");

constexpr Pair<gang_op_t, core::ReduceOp> kOps[] = {
    {GANG_SUM, core::ReduceOp::kSum}, {GANG_PROD, core::ReduceOp::kProd},
    {GANG_MIN, core::ReduceOp::kMin}, {GANG_MAX, core::ReduceOp::kMax},
    {GANG_AVG, core::ReduceOp::kAvg},
};
static_assert(sizeof kOps / sizeof kOps[0] == static_cast<size_t>(core::ReduceOp::kAvg) + 1,
              "one row per ReduceOp");

constexpr Pair<gang_device_type_t, core::DeviceType> kDevices[] = {
    {GANG_DEVICE_CPU, core::DeviceType::kCpu},
    {GANG_DEVICE_CUDA, core::DeviceType::kCuda},
};

constexpr Pair<gang_backend_opkind_t, core::OpKind> kKinds[] = {
    {GANG_BACKEND_OP_ALL_REDUCE, core::OpKind::kAllReduce},
    {GANG_BACKEND_OP_REDUCE, core::OpKind::kReduce},
    {GANG_BACKEND_OP_BROADCAST, core::OpKind::kBroadcast},
    {GANG_BACKEND_OP_ALL_GATHER, core::OpKind::kAllGather},
    {GANG_BACKEND_OP_ALL_GATHERV, core::OpKind::kAllGatherV},
    {GANG_BACKEND_OP_GATHER, core::OpKind::kGather},
    {GANG_BACKEND_OP_SCATTER, core::OpKind::kScatter},
    {GANG_BACKEND_OP_REDUCE_SCATTER, core::OpKind::kReduceScatter},
    {GANG_BACKEND_OP_REDUCE_SCATTERV, core::OpKind::kReduceScatterV},
    {GANG_BACKEND_OP_ALL_TO_ALL, core::OpKind::kAllToAll},
    {GANG_BACKEND_OP_ALL_TO_ALLV, core::OpKind::kAllToAllV},
    {GANG_BACKEND_OP_BARRIER, core::OpKind::kBarrier},
    {GANG_BACKEND_OP_SEND, core::OpKind::kSend},
    {GANG_BACKEND_OP_RECV, core::OpKind::kRecv},
};
static_assert(sizeof kKinds / sizeof kKinds[0] == core::kNumOpKinds, "one row per OpKind");

constexpr Pair<gang_backend_channel_t, core::Channel> kChannels[] = {
    {GANG_BACKEND_CHANNEL_DATA, core::Channel::kData},
    {GANG_BACKEND_CHANNEL_FINGERPRINT, core::Channel::kFingerprint},
    {GANG_BACKEND_CHANNEL_CONTROL, core::Channel::kControl},
};

// A core value with no public row is a gang bug (the tables above are
// complete by their assertions).
[[noreturn]] void no_row(const char* what, int value) {
  fail(Status::kInternal, "no public ", what, " for the core's value ", value);
}

template <typename Pub, typename Core, size_t N>
Pub must_find_pub(const Pair<Pub, Core> (&table)[N], Core core, const char* what) {
  for (const auto& p : table) {
    if (p.core == core) return p.pub;
  }
  no_row(what, static_cast<int>(core));
}

}  // namespace

gang_status_t to_public(Status status) {
  return find_pub(kStatuses, status, GANG_ERR_INTERNAL);
}
bool from_public(gang_status_t pub, Status* out) { return find_core(kStatuses, pub, out); }

gang_dtype_t to_public(core::DType dtype) { return must_find_pub(kDTypes, dtype, "dtype"); }
bool from_public(gang_dtype_t pub, core::DType* out) { return find_core(kDTypes, pub, out); }

gang_op_t to_public(core::ReduceOp op) { return must_find_pub(kOps, op, "reduction"); }
bool from_public(gang_op_t pub, core::ReduceOp* out) { return find_core(kOps, pub, out); }

gang_device_type_t to_public(core::DeviceType device) {
  return must_find_pub(kDevices, device, "device type");
}
bool from_public(int32_t pub, core::DeviceType* out) {
  return find_core(kDevices, static_cast<gang_device_type_t>(pub), out);
}

gang_backend_opkind_t to_public(core::OpKind kind) {
  return must_find_pub(kKinds, kind, "operation kind");
}
gang_backend_channel_t to_public(core::Channel channel) {
  return must_find_pub(kChannels, channel, "channel");
}

}  // namespace gang::interop
