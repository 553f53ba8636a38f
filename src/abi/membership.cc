// The C ABI of membership changes: gang_shrink, gang_grow, gang_join.
#include "abi/shim.h"

using gang::Status;

extern "C" {

GANG_API gang_status_t gang_shrink(gang_t* gang, int64_t timeout_ms, gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_shrink";
  gang::abi::out_arg(out, api, "out");
  *out = nullptr;
  const auto impl = gang::abi::pin_gang(gang, api);
  *out = gang::abi::wrap_gang(impl->shrink(gang::core::Millis(timeout_ms)));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_grow(gang_t* gang, int64_t timeout_ms, gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_grow";
  gang::abi::out_arg(out, api, "out");
  *out = nullptr;
  const auto impl = gang::abi::pin_gang(gang, api);
  auto grown = impl->grow(gang::core::Millis(timeout_ms));
  if (grown) *out = gang::abi::wrap_gang(std::move(grown));
  return GANG_OK;
  GANG_ABI_CATCH
}

GANG_API gang_status_t gang_join(const gang_options_t* options, gang_t** out) {
  GANG_ABI_TRY
  static const char* const api = "gang_join";
  gang::abi::out_arg(out, api, "out");
  *out = nullptr;
  *out = gang::abi::wrap_gang(
      gang::core::Gang::join(gang::abi::core_options(options, api)));
  return GANG_OK;
  GANG_ABI_CATCH
}

}  // extern "C"
