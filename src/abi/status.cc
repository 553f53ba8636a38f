// Version, status names and the thread's last error.
#include <cstdlib>
#include <cstring>

#include "abi/shim.h"

namespace gang::abi {
const std::string& last_error();
}

extern "C" {

GANG_API unsigned gang_version_number(void) { return GANG_VERSION_NUMBER; }

GANG_API const char* gang_version_string(void) { return GANG_VERSION_STRING; }

GANG_API const char* gang_status_name(gang_status_t status) {
  switch (status) {
#define GANG_STATUS_NAME_(name, value, msg) \
  case name:                                \
    return #name;
    GANG_STATUS_MAP(GANG_STATUS_NAME_)
#undef GANG_STATUS_NAME_
    default:
      return "GANG_STATUS_UNKNOWN";
  }
}

GANG_API const char* gang_status_string(gang_status_t status) {
  switch (status) {
#define GANG_STATUS_MSG_(name, value, msg) \
  case name:                               \
    return msg;
    GANG_STATUS_MAP(GANG_STATUS_MSG_)
#undef GANG_STATUS_MSG_
    default:
      return "unknown status";
  }
}

GANG_API const char* gang_last_error(void) {
  return gang::abi::last_error().c_str();
}

GANG_API size_t gang_last_error_copy(char* buf, size_t len) {
  const std::string& e = gang::abi::last_error();
  if (buf != nullptr && len != 0) {
    const size_t n = e.size() < len - 1 ? e.size() : len - 1;
    std::memcpy(buf, e.data(), n);
    buf[n] = '\0';
  }
  return e.size();
}

GANG_API size_t gang_dtype_size(gang_dtype_t dtype) {
  try {
    return gang::core::dtype_size(
        gang::abi::to_dtype(dtype, "gang_dtype_size"));
  } catch (...) {
    return 0;
  }
}

GANG_API void gang_free(void* ptr) { std::free(ptr); }

}  // extern "C"
