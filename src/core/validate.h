// Argument validation, done once, before an operation is issued.
#pragma once

#include "core/collective.h"

namespace gang::core {

// Throws gang::Error(kInvalidArgument) with a message that starts with the
// public function's name and names the bad argument. `emulated` is true for
// gangs whose one process stands in for every rank (every rank's buffers are
// then this process's, so root-only buffers are needed everywhere).
void validate(const CollectiveArgs& args, int rank, int size, bool emulated);

}  // namespace gang::core
