// The public C enums (gang/gang.h, gang/gang_backend.h) and the core's, in
// both directions, once: the C shim (abi/) and the module host (plugin/)
// both translate through here. Each table is a switch the compiler checks
// for gaps; from_public answers false for a value that is no member of the
// public enum (a caller's or a module's mistake, worded by the caller).
#pragma once

#include <cstdint>

#include "base/error.h"
#include "core/backend.h"
#include "core/collective.h"
#include "core/types.h"
#include "gang/gang.h"
#include "gang/gang_backend.h"

namespace gang::interop {

gang_status_t to_public(Status status);
bool from_public(gang_status_t pub, Status* out);

gang_dtype_t to_public(core::DType dtype);
bool from_public(gang_dtype_t pub, core::DType* out);

gang_op_t to_public(core::ReduceOp op);
bool from_public(gang_op_t pub, core::ReduceOp* out);

gang_device_type_t to_public(core::DeviceType device);
bool from_public(int32_t pub, core::DeviceType* out);

gang_backend_opkind_t to_public(core::OpKind kind);
gang_backend_channel_t to_public(core::Channel channel);

}  // namespace gang::interop
