#include "abi/shim.h"

#include <cstring>
#include <new>

namespace gang::abi {

namespace {

thread_local std::string t_last_error;

}  // namespace

void set_last_error(const std::string& message) { t_last_error = message; }

const std::string& last_error() { return t_last_error; }

gang_status_t to_public(Status status) {
  switch (static_cast<int>(status)) {
#define GANG_TO_PUBLIC_(name, value, msg) \
  case value:                             \
    return name;
    GANG_STATUS_MAP(GANG_TO_PUBLIC_)
#undef GANG_TO_PUBLIC_
  }
  return GANG_ERR_INTERNAL;
}

gang_status_t report(Status status, const std::string& message) {
  if (status != Status::kOk && status != Status::kInProgress) {
    set_last_error(message);
  }
  return to_public(status);
}

gang_status_t wait_work(core::Work& work, core::Millis timeout) {
  std::string message;
  const Status s = work.wait(timeout, &message);
  return report(s, message);
}

gang_status_t test_work(core::Work& work) {
  std::string message;
  const Status s = work.test(&message);
  return report(s, message);
}

gang_status_t handle_exception() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    set_last_error(e.what());
    return to_public(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return GANG_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return GANG_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return GANG_ERR_INTERNAL;
  }
}

core::DType to_dtype(gang_dtype_t dtype, const char* api) {
  switch (dtype) {
    case GANG_INT8:
      return core::DType::kInt8;
    case GANG_UINT8:
      return core::DType::kUInt8;
    case GANG_INT32:
      return core::DType::kInt32;
    case GANG_UINT32:
      return core::DType::kUInt32;
    case GANG_INT64:
      return core::DType::kInt64;
    case GANG_UINT64:
      return core::DType::kUInt64;
    case GANG_FLOAT16:
      return core::DType::kFloat16;
    case GANG_BFLOAT16:
      return core::DType::kBFloat16;
    case GANG_FLOAT32:
      return core::DType::kFloat32;
    case GANG_FLOAT64:
      return core::DType::kFloat64;
    case GANG_BOOL:
      return core::DType::kBool;
    case GANG_INT16:
      return core::DType::kInt16;
    case GANG_DTYPE_FORCE_32BIT:
      break;
  }
  fail(Status::kInvalidArgument, api, ": dtype ", static_cast<long long>(dtype),
       " is not a gang_dtype_t");
}

core::ReduceOp to_op(gang_op_t op, const char* api) {
  switch (op) {
    case GANG_SUM:
      return core::ReduceOp::kSum;
    case GANG_PROD:
      return core::ReduceOp::kProd;
    case GANG_MIN:
      return core::ReduceOp::kMin;
    case GANG_MAX:
      return core::ReduceOp::kMax;
    case GANG_AVG:
      return core::ReduceOp::kAvg;
    case GANG_OP_FORCE_32BIT:
      break;
  }
  fail(Status::kInvalidArgument, api, ": op ", static_cast<long long>(op),
       " is not a gang_op_t");
}

gang_work_t* wrap_work(std::shared_ptr<core::Work> work) {
  return work_table().insert(std::move(work));
}

gang_t* wrap_gang(std::shared_ptr<core::Gang> impl) {
  if (!impl) return nullptr;
  return gang_table().insert(std::move(impl));
}

void read_sized(void* dst, size_t dst_size, const void* src, size_t src_size,
                size_t first_size, const char* api, const char* what) {
  if (src_size < first_size) {
    fail(Status::kInvalidArgument, api, ": ", what, ".struct_size ", src_size,
         " is smaller than the first version's ", first_size,
         " (call its init function)");
  }
  std::memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
  const auto* extra = static_cast<const unsigned char*>(src) + dst_size;
  for (size_t i = 0; i + dst_size < src_size; ++i) {
    if (extra[i] != 0) {
      fail(Status::kUnsupported, api, ": ", what,
           " has nonzero bytes at offset ", dst_size + i, ", beyond the ",
           dst_size, " this library knows (built against a newer gang?)");
    }
  }
}

gang_status_t issue(gang_t* g, core::CollectiveArgs args, gang_work_t** work,
                    const char* api) {
  // Held until the operation ends: a gang_destroy meanwhile aborts it
  // rather than freeing the gang under it.
  const auto impl = pin_gang(g, api);
  if (work != nullptr) *work = nullptr;
  if (work == nullptr) {
    core::Gang::Blocking blocking(*impl);
    auto w = impl->issue(std::move(args), false);
    return w ? wait_work(*w, core::Millis(-1)) : GANG_OK;  // null: in a group
  }
  auto w = impl->issue(std::move(args), true);
  if (w) *work = wrap_work(std::move(w));
  return GANG_OK;
}

}  // namespace gang::abi
