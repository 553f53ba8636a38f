#include "abi/shim.h"

#include "interop/firewall.h"

#include <cstring>
#include <new>

namespace gang::abi {

namespace {

thread_local std::string t_last_error;

}  // namespace

void set_last_error(const std::string& message) { t_last_error = message; }

const std::string& last_error() { return t_last_error; }

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
  return interop::caught([](const char* a, const char* b) {
    try {
      set_last_error(std::string(a) + b);
    } catch (...) {
      // No memory for the message: the status says it.
    }
  });
}

namespace {

// A public enum value as the core's, or kInvalidArgument naming it.
template <typename Core, typename Pub>
Core from_public_or_fail(Pub value, const char* api, const char* what, const char* type) {
  Core out;
  if (!interop::from_public(value, &out)) {
    fail(Status::kInvalidArgument, api, ": ", what, " ", static_cast<long long>(value),
         " is not a ", type);
  }
  return out;
}

}  // namespace

core::DType to_dtype(gang_dtype_t dtype, const char* api) {
  return from_public_or_fail<core::DType>(dtype, api, "dtype", "gang_dtype_t");
}

core::ReduceOp to_op(gang_op_t op, const char* api) {
  return from_public_or_fail<core::ReduceOp>(op, api, "op", "gang_op_t");
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
    std::string message;
    const Status s = impl->run(std::move(args), &message);
    return report(s, message);
  }
  auto w = impl->issue(std::move(args), true);
  if (w) *work = wrap_work(std::move(w));
  return GANG_OK;
}

}  // namespace gang::abi
