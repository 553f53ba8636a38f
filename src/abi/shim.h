// What every extern "C" body shares: the handles behind the opaque types,
// the exception firewall, the thread's last error and the enum tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/gang.h"
#include "core/types.h"
#include "core/work.h"
#include "gang/gang.h"
#include "store/store.h"

// The opaque handles. Each starts with a magic value, checked on every entry
// and cleared on destroy, so a stale or foreign pointer is reported rather
// than followed.
struct gang_s {
  uint32_t magic;
  std::shared_ptr<gang::core::Gang> impl;
};
struct gang_store_s {
  uint32_t magic;
  std::shared_ptr<gang::store::Store> impl;
};
struct gang_work_s {
  uint32_t magic;
  std::shared_ptr<gang::core::Work> impl;
};

// The parallel gangs: one handle per distinct gang, owned here, except the
// root, which is the caller's.
struct gangs_s {
  uint32_t magic;
  gang_t* axes[11];
  std::vector<gang_t*> owned;
};

namespace gang::abi {

constexpr uint32_t kGangMagic = 0x676e6167;   // "gang"
constexpr uint32_t kStoreMagic = 0x726f7473;  // "stor"
constexpr uint32_t kWorkMagic = 0x6b726f77;   // "work"
constexpr uint32_t kGangsMagic = 0x73676e67;  // "gngs"

// Records message as this thread's last error.
void set_last_error(const std::string& message);

gang_status_t to_public(Status status);

// The tail every waiting entry point shares: wait for (or test) the work,
// make a failure this thread's last error, map the status. timeout as
// gang_work_wait's.
gang_status_t wait_work(gang::core::Work& work, gang::core::Millis timeout);
gang_status_t test_work(gang::core::Work& work);

// Turns the exception in flight into a status and the last error. Call only
// from a catch block.
gang_status_t handle_exception() noexcept;

// Handle checks; throw kInvalidArgument naming the function.
gang::core::Gang& gang_of(const gang_t* g, const char* api);
const std::shared_ptr<gang::core::Gang>& gang_ptr_of(const gang_t* g,
                                                     const char* api);
gang::store::Store& store_of(const gang_store_t* s, const char* api);
gang::core::Work& work_of(const gang_work_t* w, const char* api);

// Enum tables; throw kInvalidArgument naming the value.
gang::core::DType to_dtype(gang_dtype_t dtype, const char* api);
gang::core::ReduceOp to_op(gang_op_t op, const char* api);

// Checks an out-pointer.
template <typename T>
T* out_arg(T* p, const char* api, const char* name) {
  if (p == nullptr) fail(Status::kInvalidArgument, api, ": ", name, " is NULL");
  return p;
}

// Issues an operation: with a work out-pointer returns a handle at once,
// otherwise waits and returns the operation's status.
gang_status_t issue(gang_t* g, gang::core::CollectiveArgs args,
                    gang_work_t** work, const char* api);

// Hands a library allocation to the caller.
gang_work_t* wrap_work(std::shared_ptr<gang::core::Work> work);
gang_t* wrap_gang(std::shared_ptr<gang::core::Gang> impl);

// Copies a caller's struct by its struct_size: at least first_size bytes,
// and any bytes beyond the library's own size must be zero.
void read_sized(void* dst, size_t dst_size, const void* src, size_t src_size,
                size_t first_size, const char* api, const char* what);

}  // namespace gang::abi

// The exception firewall: every extern "C" body is wrapped in these.
#define GANG_ABI_TRY try {
#define GANG_ABI_CATCH                      \
  }                                         \
  catch (...) {                             \
    return ::gang::abi::handle_exception(); \
  }
