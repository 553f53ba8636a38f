// Host reduction kernels. Floating types reduce in at least float32 and
// round each partial result back to the dtype (nearest even); integers wrap.
#pragma once

#include <cstddef>

#include "core/types.h"

namespace gang::core {

// out[i] = a[i] op b[i] for n elements; out may alias a or b. AVG reduces as
// SUM: finish it with finish_avg once every contribution is in.
void reduce(void* out, const void* a, const void* b, size_t n, DType dtype,
            ReduceOp op);

// Turns n sums into averages over `size` ranks, dividing in at least
// float32. Floating types only (see reducible); others are left as they are.
void finish_avg(void* buf, size_t n, DType dtype, int size);

// out = the op applied over `copies` copies of in (the fake gang's answer for
// a gang whose every rank holds `in`). AVG gives `in` itself. out may alias in.
void reduce_copies(void* out, const void* in, size_t n, DType dtype,
                   ReduceOp op, int copies);

}  // namespace gang::core
