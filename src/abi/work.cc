// gang_work_*: waiting for asynchronous operations.
#include "abi/shim.h"

using gang::Status;

extern "C" {

GANG_API gang_status_t gang_work_wait(gang_work_t* work, int64_t timeout_ms) {
  GANG_ABI_TRY
  static const char* const api = "gang_work_wait";
  const auto w = gang::abi::pin_work(work, api);
  if (timeout_ms < -1) {
    gang::fail(Status::kInvalidArgument, api, ": timeout_ms ", timeout_ms,
               " must be -1 or >= 0");
  }
  return gang::abi::wait_work(*w, gang::core::Millis(timeout_ms));
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_work_test(gang_work_t* work) {
  GANG_ABI_TRY
  return gang::abi::test_work(*gang::abi::pin_work(work, "gang_work_test"));
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_work_destroy(gang_work_t* work) {
  GANG_ABI_TRY
  if (work == nullptr) return GANG_OK;
  // The handle dies first; the operation is still waited for (bounded by
  // its deadline), so its buffers are free once this returns.
  const auto w = gang::abi::work_table().remove(work, "gang_work_destroy");
  if (w) w->wait(gang::core::Millis(-1), nullptr);  // null: the parent's
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
