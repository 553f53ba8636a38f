// gang's failures as the exceptions c10d's callers catch: DistBackendError
// for what went wrong in the job (a lost peer, a timeout, an abort, a
// mismatch, the store), RuntimeError (c10::Error) for a bad argument, as
// ProcessGroupGloo raises them. Each message starts with the words users
// and PyTorch's own tests look for ("Timed out", ...) and goes on with
// gang's own detail, which names the ranks.
#pragma once

#include <exception>
#include <string>

#include <gang/gang.h>

namespace gang_torch {

// The exception for `status` from the call `what`, with the message gang
// left on this thread (read it before any other gang call).
std::exception_ptr error_of(gang_status_t status, const std::string& what);

// Throws error_of(status, what).
[[noreturn]] void raise(gang_status_t status, const std::string& what);

// Throws when status is not GANG_OK.
inline void check(gang_status_t status, const char* what) {
  if (status != GANG_OK) raise(status, what);
}

// A RuntimeError for a bad argument that gang.torch itself found.
[[noreturn]] void refuse(const std::string& message);

}  // namespace gang_torch
