#include "core/types.h"

#include <cstring>

namespace gang::core {

namespace {

struct DTypeInfo {
  size_t size;
  const char* name;
  bool floating;
};

// Indexed by DType.
constexpr DTypeInfo kDTypes[] = {
    {1, "int8", false},   {1, "uint8", false},   {4, "int32", false},
    {4, "uint32", false}, {8, "int64", false},   {8, "uint64", false},
    {2, "float16", true}, {2, "bfloat16", true}, {4, "float32", true},
    {8, "float64", true}, {1, "bool", false},     {2, "int16", false},
};

constexpr const char* kOpNames[] = {"sum", "prod", "min", "max", "avg"};

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Decoded values (a peer's frame) may be out of range: they name no type.
constexpr DTypeInfo kNoDType = {0, "an unknown dtype", false};
static_assert(sizeof kDTypes / sizeof kDTypes[0] == size_t(kLastDType) + 1,
              "one row per DType");

const DTypeInfo& info(DType d) {
  return d <= kLastDType ? kDTypes[static_cast<size_t>(d)] : kNoDType;
}

}  // namespace

size_t dtype_size(DType d) { return info(d).size; }
const char* dtype_name(DType d) { return info(d).name; }
bool is_floating(DType d) { return info(d).floating; }
bool reducible(ReduceOp op, DType d) {
  return op != ReduceOp::kAvg || is_floating(d);
}
const char* reduce_op_name(ReduceOp op) {
  return kOpNames[static_cast<size_t>(op)];
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) {  // inf / nan: keep the payload's top bits
    return bits_float(sign | 0x7f800000u | (man << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float32.
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) {  // inf or nan (nan stays quiet nan)
    return sign | (absu > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (absu >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return sign | 0x7c00u;
  }
  if (absu < 0x38800000u) {
    // Below the smallest normal half (2^-14): the result is subnormal or
    // zero. Scale to units of 2^-24 and round to nearest even in float
    // arithmetic, which is exact here.
    const float scaled = bits_float(absu) * 16777216.0f;
    // Nearest-even rounding of a value < 1024 using the 2^23 trick.
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return sign | static_cast<uint16_t>(rounded);
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  uint32_t v = absu - (112u << 23);
  const uint32_t lsb = (v >> 13) & 1u;
  v += 0x0fffu + lsb;
  return sign | static_cast<uint16_t>(v >> 13);
}

float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // nan: keep it quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

}  // namespace gang::core
