// All-reduce of sparse (COO) tensors, as gloo's backend does it: every
// rank's indices and values go to every rank, which adds them up. Two
// gang calls: the ranks' entry counts, then the entries themselves.
#pragma once

#include <functional>

#include <ATen/ATen.h>
#include <gang/gang.h>

#include "work.h"

namespace gang_torch {

// The sum over the group of t, a sparse COO tensor of the same sizes on
// every rank, coalesced. `run` runs each gang call to its end.
at::Tensor sparse_sum(gang_t* gang, const at::Tensor& t, int size,
                      const std::function<void(const Step&)>& run);

}  // namespace gang_torch
