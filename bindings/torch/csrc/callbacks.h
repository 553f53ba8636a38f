// Where the futures of gang.torch's works are completed, and so where
// their callbacks (DDP's comm hooks, .then() chains) run: never on the
// thread that completes gang's works, and never short of a thread. A
// callback may issue a collective and wait for it (PowerSGD's hook does):
// the pool starts another thread whenever every thread it has is busy, so
// the completion that callback waits for always finds one.
#pragma once

#include <functional>

namespace gang_torch {

// Runs fn on a thread of the process's callback pool.
void run_callback(std::function<void()> fn);

}  // namespace gang_torch
