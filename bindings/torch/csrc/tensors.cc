#include "tensors.h"

#include <string>

#include <c10/util/Exception.h>

#include "errors.h"

namespace gang_torch {

bool gang_dtype(at::ScalarType type, gang_dtype_t* out) {
  switch (type) {
    case at::kChar: *out = GANG_INT8; return true;
    case at::kByte: *out = GANG_UINT8; return true;
    case at::kShort: *out = GANG_INT16; return true;
    case at::kInt: *out = GANG_INT32; return true;
    case at::kLong: *out = GANG_INT64; return true;
    case at::kUInt32: *out = GANG_UINT32; return true;
    case at::kUInt64: *out = GANG_UINT64; return true;
    case at::kHalf: *out = GANG_FLOAT16; return true;
    case at::kBFloat16: *out = GANG_BFLOAT16; return true;
    case at::kFloat: *out = GANG_FLOAT32; return true;
    case at::kDouble: *out = GANG_FLOAT64; return true;
    case at::kBool: *out = GANG_BOOL; return true;
    default: return false;
  }
}

Buffer movable(const at::Tensor& t) {
  gang_dtype_t dtype;
  if (!gang_dtype(t.scalar_type(), &dtype)) dtype = GANG_UINT8;
  return {t.data_ptr(), moved_count(t), dtype};
}

size_t moved_count(const at::Tensor& t) {
  gang_dtype_t dtype;
  const size_t n = static_cast<size_t>(t.numel());
  return gang_dtype(t.scalar_type(), &dtype) ? n : n * t.element_size();
}

at::Tensor flat_in(const at::Tensor& t) {
  return t.is_contiguous() ? t.reshape({-1}) : t.contiguous().reshape({-1});
}

at::Tensor flat_out(const at::Tensor& t, Plan& plan) {
  if (t.is_contiguous()) return t.view({-1});
  at::Tensor stage = at::empty({t.numel()}, t.options());
  at::Tensor target = t;
  plan.then([target, stage]() mutable { target.copy_(stage.view(target.sizes())); });
  return stage;
}

at::Tensor flat_inout(const at::Tensor& t, Plan& plan) {
  at::Tensor flat = flat_out(t, plan);
  if (!t.is_contiguous()) flat.copy_(t.reshape({-1}));
  return flat;
}

namespace {

using Kind = c10d::ReduceOp::RedOpType;

std::string name_of(Kind kind) {
  switch (kind) {
    case Kind::SUM: return "SUM";
    case Kind::AVG: return "AVG";
    case Kind::PRODUCT: return "PRODUCT";
    case Kind::MIN: return "MIN";
    case Kind::MAX: return "MAX";
    case Kind::BAND: return "BAND";
    case Kind::BOR: return "BOR";
    case Kind::BXOR: return "BXOR";
    case Kind::PREMUL_SUM: return "PREMUL_SUM";
    default: return "reduction " + std::to_string(static_cast<int>(kind));
  }
}

void premultiply(at::Tensor& flat, const c10d::ReduceOp& op) {
  auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(factor != nullptr, "gang: PREMUL_SUM without its factor");
  if (factor->tensor_factor.defined()) {
    flat.mul_(factor->tensor_factor.to(flat.device()));
  } else {
    flat.mul_(factor->double_factor);
  }
}

}  // namespace

Reduction reduction(at::Tensor flat, const c10d::ReduceOp& op, const char* what) {
  Kind kind = op.op_;
  bool floating = flat.is_floating_point() || flat.is_complex();
  if (kind == Kind::BAND || kind == Kind::BOR || kind == Kind::BXOR) {
    if (floating) {
      refuse(std::string(what) + ": ReduceOp." + name_of(kind) +
             " reduces integers and bool, not " + std::string(c10::toString(flat.scalar_type())));
    }
    return {flat, GANG_SUM, true, kind};
  }
  gang_op_t gop;
  switch (kind) {
    case Kind::SUM: gop = GANG_SUM; break;
    case Kind::PRODUCT: gop = GANG_PROD; break;
    case Kind::MIN: gop = GANG_MIN; break;
    case Kind::MAX: gop = GANG_MAX; break;
    case Kind::AVG: gop = GANG_AVG; break;
    case Kind::PREMUL_SUM: premultiply(flat, op); gop = GANG_SUM; break;
    default: refuse(std::string(what) + ": gang has no " + name_of(kind));
  }
  if (gop == GANG_AVG && !floating) {
    refuse(std::string(what) + ": ReduceOp.AVG averages floating types only, not " +
           std::string(c10::toString(flat.scalar_type())) + "; use SUM and divide");
  }
  if (flat.is_complex()) {
    if (gop != GANG_SUM && gop != GANG_AVG) {
      refuse(std::string(what) + ": ReduceOp." + name_of(kind) +
             " is not defined for complex tensors");
    }
    flat = at::view_as_real(flat).reshape({-1});
  }
  gang_dtype_t dtype;
  if (!gang_dtype(flat.scalar_type(), &dtype)) {
    refuse(std::string(what) + ": gang cannot reduce " +
           std::string(c10::toString(flat.scalar_type())));
  }
  return {flat, gop, false, kind};
}

at::Tensor combine(const at::Tensor& gathered, Kind kind) {
  at::Tensor acc = gathered[0].clone();
  for (int64_t r = 1; r < gathered.size(0); ++r) {
    if (kind == Kind::BAND) {
      acc.bitwise_and_(gathered[r]);
    } else if (kind == Kind::BOR) {
      acc.bitwise_or_(gathered[r]);
    } else {
      acc.bitwise_xor_(gathered[r]);
    }
  }
  return acc;
}

}  // namespace gang_torch
