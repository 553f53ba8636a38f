/* reference.c - the tests' own model of gang's element types and reductions,
 * written independently of the library. */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const gang_dtype_t ref_dtypes[REF_NUM_DTYPES] = {
    GANG_INT8,    GANG_UINT8,   GANG_INT32,    GANG_UINT32,  GANG_INT64,
    GANG_UINT64,  GANG_FLOAT16, GANG_BFLOAT16, GANG_FLOAT32, GANG_FLOAT64,
    GANG_BOOL,    GANG_INT16,
};
const gang_op_t ref_ops[REF_NUM_OPS] = {GANG_SUM, GANG_PROD, GANG_MIN, GANG_MAX,
                                        GANG_AVG};

size_t ref_dtype_size(gang_dtype_t dt) {
  switch (dt) {
    case GANG_INT8:
    case GANG_UINT8:
    case GANG_BOOL:
      return 1;
    case GANG_FLOAT16:
    case GANG_BFLOAT16:
    case GANG_INT16:
      return 2;
    case GANG_INT32:
    case GANG_UINT32:
    case GANG_FLOAT32:
      return 4;
    case GANG_INT64:
    case GANG_UINT64:
    case GANG_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

const char* ref_dtype_name(gang_dtype_t dt) {
  switch (dt) {
    case GANG_INT8: return "int8";
    case GANG_UINT8: return "uint8";
    case GANG_INT32: return "int32";
    case GANG_UINT32: return "uint32";
    case GANG_INT64: return "int64";
    case GANG_UINT64: return "uint64";
    case GANG_FLOAT16: return "float16";
    case GANG_BFLOAT16: return "bfloat16";
    case GANG_FLOAT32: return "float32";
    case GANG_FLOAT64: return "float64";
    case GANG_BOOL: return "bool";
    case GANG_INT16: return "int16";
    default: return "?";
  }
}

const char* ref_op_name(gang_op_t op) {
  switch (op) {
    case GANG_SUM: return "SUM";
    case GANG_PROD: return "PROD";
    case GANG_MIN: return "MIN";
    case GANG_MAX: return "MAX";
    case GANG_AVG: return "AVG";
    default: return "?";
  }
}

/* AVG is for floating types only: gang refuses it for bool and integers. */
int ref_reducible(gang_dtype_t dt, gang_op_t op) {
  return op != GANG_AVG || ref_dtype_is_float(dt);
}

int ref_dtype_is_float(gang_dtype_t dt) {
  return dt == GANG_FLOAT16 || dt == GANG_BFLOAT16 || dt == GANG_FLOAT32 ||
         dt == GANG_FLOAT64;
}

int ref_dtype_is_signed(gang_dtype_t dt) {
  return dt == GANG_INT8 || dt == GANG_INT16 || dt == GANG_INT32 ||
         dt == GANG_INT64 || ref_dtype_is_float(dt);
}

/* ---- 16-bit floats --------------------------------------------------------- */

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Keeps the top bits of m, dropping `shift` bits with round-half-even. */
static uint32_t round_shift(uint32_t m, int shift) {
  uint32_t q, rem, half;
  if (shift <= 0) return m;
  if (shift >= 32) return 0; /* m < 2^24 <= 2^(shift-1): below half */
  q = m >> shift;
  rem = m & ((1u << shift) - 1u);
  half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return q;
}

uint16_t ref_float_to_half(float f) {
  const uint32_t x = f2u(f);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  int e;
  uint32_t m, q;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* quiet NaN */
  if (ax == 0x7f800000u) return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x00800000u) return sign; /* float zero/subnormal: far below half */
  e = (int)(ax >> 23) - 127;
  m = (ax & 0x7fffffu) | 0x800000u; /* 24-bit significand, value m*2^(e-23) */
  if (e > 15) return (uint16_t)(sign | 0x7c00u);
  if (e >= -14) {
    /* Normal half: keep 11 bits. A carry out of the significand bumps the
     * exponent, up to infinity, which is exactly right. */
    q = round_shift(m, 13);
    return (uint16_t)(sign | (((uint32_t)(e + 15) << 10) + q - 0x400u));
  }
  /* Subnormal half: units of 2^-24, value m*2^(e-23) = m*2^(e+1) units. */
  q = round_shift(m, 13 + (-14 - e));
  return (uint16_t)(sign | q); /* q == 0x400 is the smallest normal */
}

float ref_half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return u2f(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float v = (float)m / 16777216.0f; /* exact */
    return sign ? -v : v;
  }
  return u2f(sign | ((e - 15 + 127) << 23) | (m << 13));
}

uint16_t ref_float_to_bf16(float f) {
  const uint32_t x = f2u(f);
  uint32_t upper = x >> 16;
  const uint32_t lower = x & 0xffffu;
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(upper | 0x40u);
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;
  return (uint16_t)upper;
}

float ref_bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

/* ---- elements as bits ------------------------------------------------------ */

uint64_t ref_load(gang_dtype_t dt, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * ref_dtype_size(dt);
  switch (ref_dtype_size(dt)) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    case 8: { uint64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
  }
}

void ref_store(gang_dtype_t dt, void* buf, size_t i, uint64_t bits) {
  unsigned char* p = (unsigned char*)buf + i * ref_dtype_size(dt);
  switch (ref_dtype_size(dt)) {
    case 1: *p = (unsigned char)bits; break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); break; }
    case 8: memcpy(p, &bits, 8); break;
    default: break;
  }
}

static uint64_t mask_of(gang_dtype_t dt) {
  const size_t n = ref_dtype_size(dt);
  return n >= 8 ? ~0ull : ((1ull << (8 * n)) - 1ull);
}

uint64_t ref_from_int(gang_dtype_t dt, int64_t v) {
  if (dt == GANG_BOOL) return v != 0;
  return (uint64_t)v & mask_of(dt);
}

static uint64_t from_float(gang_dtype_t dt, float f) {
  switch (dt) {
    case GANG_FLOAT16: return ref_float_to_half(f);
    case GANG_BFLOAT16: return ref_float_to_bf16(f);
    default: return f2u(f);
  }
}

static float to_float(gang_dtype_t dt, uint64_t bits) {
  switch (dt) {
    case GANG_FLOAT16: return ref_half_to_float((uint16_t)bits);
    case GANG_BFLOAT16: return ref_bf16_to_float((uint16_t)bits);
    default: return u2f((uint32_t)bits);
  }
}

static double bits_double(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

uint64_t ref_from_double(gang_dtype_t dt, double v) {
  if (dt == GANG_FLOAT64) return double_bits(v);
  if (ref_dtype_is_float(dt)) return from_float(dt, (float)v);
  return ref_from_int(dt, (int64_t)v);
}

/* The signed value of bits in an integer dtype. */
static int64_t as_signed(gang_dtype_t dt, uint64_t bits) {
  switch (ref_dtype_size(dt)) {
    case 1: return (int8_t)(uint8_t)bits;
    case 2: return (int16_t)(uint16_t)bits;
    case 4: return (int32_t)(uint32_t)bits;
    default: return (int64_t)bits;
  }
}

double ref_to_double(gang_dtype_t dt, uint64_t bits) {
  if (dt == GANG_FLOAT64) return bits_double(bits);
  if (ref_dtype_is_float(dt)) return (double)to_float(dt, bits);
  if (ref_dtype_is_signed(dt)) return (double)as_signed(dt, bits);
  return (double)bits;
}

uint64_t ref_reduce(gang_dtype_t dt, gang_op_t op, uint64_t a, uint64_t b) {
  if (dt == GANG_BOOL) { /* "or" for SUM and MAX, "and" for PROD and MIN */
    if (op == GANG_PROD || op == GANG_MIN) return a != 0 && b != 0;
    return a != 0 || b != 0;
  }
  if (dt == GANG_FLOAT64) {
    const double x = bits_double(a), y = bits_double(b);
    switch (op) {
      case GANG_SUM:
      case GANG_AVG: return double_bits(x + y);
      case GANG_PROD: return double_bits(x * y);
      case GANG_MIN: return y < x ? b : a;
      case GANG_MAX: return x < y ? b : a;
      default: return 0;
    }
  }
  if (ref_dtype_is_float(dt)) {
    const float x = to_float(dt, a), y = to_float(dt, b);
    switch (op) {
      case GANG_SUM:
      case GANG_AVG: return from_float(dt, x + y);
      case GANG_PROD: return from_float(dt, x * y);
      case GANG_MIN: return y < x ? b : a;
      case GANG_MAX: return x < y ? b : a;
      default: return 0;
    }
  }
  switch (op) {
    case GANG_SUM: return (a + b) & mask_of(dt);
    case GANG_PROD: return (a * b) & mask_of(dt);
    case GANG_MIN:
      if (ref_dtype_is_signed(dt)) return as_signed(dt, b) < as_signed(dt, a) ? b : a;
      return b < a ? b : a;
    case GANG_MAX:
      if (ref_dtype_is_signed(dt)) return as_signed(dt, a) < as_signed(dt, b) ? b : a;
      return a < b ? b : a;
    default: return 0;
  }
}

uint64_t ref_finish(gang_dtype_t dt, gang_op_t op, uint64_t v, int n) {
  if (op != GANG_AVG) return v;
  if (dt == GANG_FLOAT64) return double_bits(bits_double(v) / (double)n);
  return from_float(dt, to_float(dt, v) / (float)n); /* floats only */
}

const char* ref_format(gang_dtype_t dt, uint64_t bits, char* buf,
                       size_t len) {
  if (ref_dtype_is_float(dt)) {
    snprintf(buf, len, "%.9g (0x%" PRIx64 ")", ref_to_double(dt, bits), bits);
  } else if (ref_dtype_is_signed(dt)) {
    snprintf(buf, len, "%" PRId64, as_signed(dt, bits));
  } else {
    snprintf(buf, len, "%" PRIu64, bits);
  }
  return buf;
}

uint64_t ref_hash(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = (const unsigned char*)data;
  size_t i;
  for (i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
