// The core's element types, reductions and operation kinds. The C shim maps
// the public enums onto these through tables; nothing casts between them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gang::core {

enum class DType : uint8_t {
  kInt8,
  kUInt8,
  kInt32,
  kUInt32,
  kInt64,
  kUInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
  kBool,
  kInt16,
};
constexpr DType kLastDType = DType::kInt16;  // for checks of decoded values

enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };

enum class DeviceType : uint8_t { kCpu, kCuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* reduce_op_name(ReduceOp op);
bool is_floating(DType dtype);
// Whether gang reduces `dtype` with `op`: every pair but AVG of a
// non-floating type (bool, which has no sum, and the integers, whose mean
// is not an integer: refused, as torch refuses it, rather than truncated).
// Backends are asked only about these.
bool reducible(ReduceOp op, DType dtype);

// IEEE binary16 and bfloat16 <-> float32, rounding to nearest even.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace gang::core
