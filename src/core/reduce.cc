#include "core/reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/copy.h"
#include "base/float_env.h"

namespace gang::core {

namespace {

// Integers reduce in their unsigned twin so that SUM and PROD wrap without
// undefined behaviour.
template <typename T>
struct IntOps {
  using U = std::make_unsigned_t<T>;
  static T sum(T a, T b) { return static_cast<T>(U(a) + U(b)); }
  static T prod(T a, T b) { return static_cast<T>(U(a) * U(b)); }
};

template <typename T, typename F>
void apply(void* out, const void* a, const void* b, size_t n, F f) {
  // memcpy-free typed access: the buffers come from the user and are
  // element-aligned for every dtype the library accepts.
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
}

template <typename T>
void reduce_native(void* out, const void* a, const void* b, size_t n,
                   ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if constexpr (std::is_integral_v<T>) {
        apply<T>(out, a, b, n, IntOps<T>::sum);
      } else {
        apply<T>(out, a, b, n, [](T p, T q) { return p + q; });
      }
      return;
    case ReduceOp::kProd:
      if constexpr (std::is_integral_v<T>) {
        apply<T>(out, a, b, n, IntOps<T>::prod);
      } else {
        apply<T>(out, a, b, n, [](T p, T q) { return p * q; });
      }
      return;
    case ReduceOp::kMin:
      apply<T>(out, a, b, n, [](T p, T q) { return q < p ? q : p; });
      return;
    case ReduceOp::kMax:
      apply<T>(out, a, b, n, [](T p, T q) { return p < q ? q : p; });
      return;
  }
}

// Half-width floats: widen to float32, reduce, round back.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void reduce_half(void* out, const void* a, const void* b, size_t n,
                 ReduceOp op) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) o[i] = Narrow(Widen(x[i]) + Widen(y[i]));
      return;
    case ReduceOp::kProd:
      for (size_t i = 0; i < n; ++i) o[i] = Narrow(Widen(x[i]) * Widen(y[i]));
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i)
        o[i] = Widen(y[i]) < Widen(x[i]) ? y[i] : x[i];
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i)
        o[i] = Widen(x[i]) < Widen(y[i]) ? y[i] : x[i];
      return;
  }
}

// bool: bytes read as 0 or 1; SUM and MAX are "or", PROD and MIN "and".
void reduce_bool(void* out, const void* a, const void* b, size_t n,
                 ReduceOp op) {
  uint8_t* o = static_cast<uint8_t*>(out);
  const uint8_t* x = static_cast<const uint8_t*>(a);
  const uint8_t* y = static_cast<const uint8_t*>(b);
  if (op == ReduceOp::kProd || op == ReduceOp::kMin) {
    for (size_t i = 0; i < n; ++i) o[i] = (x[i] != 0) & (y[i] != 0);
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = (x[i] | y[i]) != 0;
  }
}

template <typename T>
void divide_native(void* buf, size_t n, int size) {
  T* p = static_cast<T*>(buf);
  const T d = static_cast<T>(size);
  for (size_t i = 0; i < n; ++i) p[i] = p[i] / d;
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void divide_half(void* buf, size_t n, int size) {
  uint16_t* p = static_cast<uint16_t*>(buf);
  const float d = static_cast<float>(size);
  for (size_t i = 0; i < n; ++i) p[i] = Narrow(Widen(p[i]) / d);
}

}  // namespace

void reduce(void* out, const void* a, const void* b, size_t n, DType dtype,
            ReduceOp op) {
  const base::FloatEnvHold hold;
  switch (dtype) {
    case DType::kInt8:
      return reduce_native<int8_t>(out, a, b, n, op);
    case DType::kUInt8:
      return reduce_native<uint8_t>(out, a, b, n, op);
    case DType::kInt32:
      return reduce_native<int32_t>(out, a, b, n, op);
    case DType::kUInt32:
      return reduce_native<uint32_t>(out, a, b, n, op);
    case DType::kInt64:
      return reduce_native<int64_t>(out, a, b, n, op);
    case DType::kUInt64:
      return reduce_native<uint64_t>(out, a, b, n, op);
    case DType::kFloat16:
      return reduce_half<half_to_float, float_to_half>(out, a, b, n, op);
    case DType::kBFloat16:
      return reduce_half<bf16_to_float, float_to_bf16>(out, a, b, n, op);
    case DType::kFloat32:
      return reduce_native<float>(out, a, b, n, op);
    case DType::kFloat64:
      return reduce_native<double>(out, a, b, n, op);
    case DType::kBool:
      return reduce_bool(out, a, b, n, op);
    case DType::kInt16:
      return reduce_native<int16_t>(out, a, b, n, op);
  }
}

void finish_avg(void* buf, size_t n, DType dtype, int size) {
  const base::FloatEnvHold hold;
  switch (dtype) {
    case DType::kFloat16:
      return divide_half<half_to_float, float_to_half>(buf, n, size);
    case DType::kBFloat16:
      return divide_half<bf16_to_float, float_to_bf16>(buf, n, size);
    case DType::kFloat32:
      return divide_native<float>(buf, n, size);
    case DType::kFloat64:
      return divide_native<double>(buf, n, size);
    case DType::kInt8:  // never averaged (see reducible)
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
    case DType::kBool:
      return;
  }
}

void reduce_copies(void* out, const void* in, size_t n, DType dtype,
                   ReduceOp op, int copies) {
  const base::FloatEnvHold hold;
  const size_t bytes = n * dtype_size(dtype);
  if (bytes == 0) return;
  if (op == ReduceOp::kAvg || copies <= 1) {
    base::move_bytes(out, in, bytes);
    return;
  }
  // Keep the input: out may alias it.
  std::vector<unsigned char> x(static_cast<const unsigned char*>(in),
                               static_cast<const unsigned char*>(in) + bytes);
  base::copy_bytes(out, x.data(), bytes);
  for (int i = 1; i < copies; ++i) reduce(out, out, x.data(), n, dtype, op);
}

}  // namespace gang::core
