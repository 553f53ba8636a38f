// The exception firewall: nothing thrown inside gang crosses into C (the
// C shim's callers, or a backend module calling back). Called from a catch
// block, it hands the exception in flight to `say` as one or two C strings
// (no allocation: it may run just after one failed) and returns its public
// status, never a success for an error.
#pragma once

#include <exception>
#include <new>

#include "base/error.h"
#include "interop/public_enums.h"

namespace gang::interop {

template <typename Say>
gang_status_t caught(Say&& say) noexcept {
  try {
    throw;
  } catch (const Error& e) {
    say(e.what(), "");
    const gang_status_t pub = to_public(e.status());
    return pub == GANG_OK || pub == GANG_IN_PROGRESS ? GANG_ERR_INTERNAL : pub;
  } catch (const std::bad_alloc&) {
    say("out of memory", "");
    return GANG_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    say("internal error: ", e.what());
    return GANG_ERR_INTERNAL;
  } catch (...) {
    say("internal error: unknown exception", "");
    return GANG_ERR_INTERNAL;
  }
}

}  // namespace gang::interop
