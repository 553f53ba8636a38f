#include "errors.h"

#include <c10/util/Exception.h>

namespace gang_torch {
namespace {

c10::SourceLocation here(const char* function) {
  return c10::SourceLocation{function, __FILE__, static_cast<uint32_t>(__LINE__)};
}

// The words c10d's users match, by what failed.
const char* headline(gang_status_t status) {
  switch (status) {
    case GANG_ERR_TIMEOUT: return "Timed out";
    case GANG_ERR_PEER_LOST: return "failed: a peer was lost (connection closed)";
    case GANG_ERR_ABORTED: return "failed: the process group was aborted or has failed";
    case GANG_ERR_MISMATCH: return "failed: ranks called different collectives";
    case GANG_ERR_STORE: return "failed: the store failed";
    default: return "failed";
  }
}

}  // namespace

std::exception_ptr error_of(gang_status_t status, const std::string& what) {
  std::string detail = gang_last_error();
  std::string message = "gang: " + what + " " + headline(status) + " (" +
                        gang_status_name(status) + "): " + detail;
  switch (status) {
    case GANG_ERR_INVALID_ARGUMENT:
    case GANG_ERR_UNSUPPORTED:
      return std::make_exception_ptr(c10::Error(here(__func__), message));
    default:
      return std::make_exception_ptr(c10::DistBackendError(here(__func__), message));
  }
}

void raise(gang_status_t status, const std::string& what) {
  std::rethrow_exception(error_of(status, what));
}

void refuse(const std::string& message) {
  throw c10::Error(here(__func__), "gang: " + message);
}

}  // namespace gang_torch
