// Tensors as gang's operations take them: flat, contiguous buffers of a
// dtype gang knows, and c10d's reductions as gang's.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <gang/gang.h>

#include "work.h"

namespace gang_torch {

// A flat buffer gang moves: pointer, element count and dtype.
struct Buffer {
  void* data;
  size_t count;
  gang_dtype_t dtype;
};

// gang's dtype of `type`, or false when gang has none (complex, float8,
// unsigned 16-bit: moved as bytes, never reduced).
bool gang_dtype(at::ScalarType type, gang_dtype_t* out);

// t (contiguous, flat) as gang moves it: in its dtype, or as bytes.
Buffer movable(const at::Tensor& t);
// How many elements of t gang moves (its bytes for dtypes gang does not
// know), for any t: no copy is made to count them.
size_t moved_count(const at::Tensor& t);

// A 1-D contiguous view of t, or a contiguous copy of it.
at::Tensor flat_in(const at::Tensor& t);
// A 1-D contiguous tensor t's result can be written to: a view of t, or a
// staging buffer the plan copies into t once its operations are done.
at::Tensor flat_out(const at::Tensor& t, Plan& plan);
// flat_out for an operation in place: the staging buffer starts as t.
at::Tensor flat_inout(const at::Tensor& t, Plan& plan);

// c10d's reduction as gang runs it on `flat` (a flat contiguous tensor):
// gang's op, or a bitwise one done locally over all-gathered inputs.
// PREMUL_SUM's factor is applied to flat here (flat must be the caller's
// own buffer). Complex tensors are reduced as real pairs (SUM, AVG).
// Refuses (RuntimeError, as gloo does) what cannot be reduced.
struct Reduction {
  at::Tensor buffer;   // what gang reduces (flat, or its real view)
  gang_op_t op;        // when !bitwise
  bool bitwise;        // BAND, BOR, BXOR
  c10d::ReduceOp::RedOpType kind;
};
Reduction reduction(at::Tensor flat, const c10d::ReduceOp& op, const char* what);

// The bitwise reduction `kind` of the rows of `gathered` ([size, n]).
at::Tensor combine(const at::Tensor& gathered, c10d::ReduceOp::RedOpType kind);

}  // namespace gang_torch
