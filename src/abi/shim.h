// What every extern "C" body shares: the tables behind the opaque handles,
// the exception firewall, the thread's last error and the enum tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/handles.h"
#include "base/error.h"
#include "core/gang.h"
#include "core/types.h"
#include "core/work.h"
#include "gang/gang.h"
#include "interop/public_enums.h"
#include "store/store.h"

namespace gang::abi {

// The parallel gangs behind a gangs_t: one handle per axis, those of
// distinct gangs made here owned here; the root is the caller's.
struct Gangs {
  gang_t* axes[11] = {};
  std::vector<gang_t*> owned;
};

// The live handles of each kind (see handles.h).
using GangTable = HandleTable<gang_t, core::Gang>;
using StoreTable = HandleTable<gang_store_t, store::Store>;
using WorkTable = HandleTable<gang_work_t, core::Work>;
using GangsTable = HandleTable<gangs_t, Gangs>;
GangTable& gang_table();
StoreTable& store_table();
WorkTable& work_table();
GangsTable& gangs_table();

// Records message as this thread's last error.
void set_last_error(const std::string& message);

using interop::to_public;

// The tail every waiting entry point shares: wait for (or test) the work,
// make a failure this thread's last error, map the status. timeout as
// gang_work_wait's.
gang_status_t wait_work(gang::core::Work& work, gang::core::Millis timeout);
gang_status_t test_work(gang::core::Work& work);

// Turns the exception in flight into a status and the last error. Call only
// from a catch block.
gang_status_t handle_exception() noexcept;

// The object behind a live handle, pinned for the caller: hold it for the
// whole call, so a gang_destroy on another thread cannot free it meanwhile.
// A NULL, destroyed or foreign handle is kInvalidArgument naming api.
inline std::shared_ptr<core::Gang> pin_gang(const gang_t* g, const char* api) {
  return gang_table().pin(g, api);
}
inline std::shared_ptr<store::Store> pin_store(const gang_store_t* s,
                                               const char* api) {
  return store_table().pin(s, api);
}
inline std::shared_ptr<core::Work> pin_work(const gang_work_t* w,
                                            const char* api) {
  return work_table().pin(w, api);
}

// gang_store_callbacks_t's functions as the store layer's Callbacks
// (abi/store_callbacks.cc).
store::Callbacks store_callbacks(const gang_store_callbacks_t& c);

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

// Hands an object to the caller as a new handle (NULL for a null gang).
gang_work_t* wrap_work(std::shared_ptr<gang::core::Work> work);
gang_t* wrap_gang(std::shared_ptr<gang::core::Gang> impl);
// gang_options_t (checked, size-versioned) as the core takes it; abi/gang.cc.
core::GangOptions core_options(const gang_options_t* options, const char* api);

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
