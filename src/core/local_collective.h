// Collectives computed in one process for a gang whose every rank holds this
// process's data: the fake gang's semantics, and exactly what a real gang of
// size 1 does.
#pragma once

#include "core/collective.h"

namespace gang::core {

// Runs a validated operation for rank `rank` of `size`. Send and recv are
// not handled here (there is no peer); the caller rejects them.
void run_local(const CollectiveArgs& args, int rank, int size);

}  // namespace gang::core
