// libgang-nccl.so: gang's backend for CUDA gangs, over NCCL. A module
// (include/gang/gang_backend.h): it needs gang's public headers and the
// CUDA/NCCL headers to build, and loads libcudart and libnccl itself
// (nccl_api.cc), so a machine without them gets GANG_ERR_UNAVAILABLE naming
// the missing one.
//
// One instance per gang and process (nccl_instance.h): an NCCL communicator
// (non-blocking unless GANG_NCCL_BLOCKING=1), a stream of its own for gangs that set none, pooled works
// and a watchdog thread. nccl_comm.cc makes, splits and ends communicators;
// nccl_ops.cc posts operations and waits for them. The watchdog polls the
// communicator's asynchronous error and every live work's deadline; on an
// error or a deadline it aborts the communicator and reports the failure
// (poll_error). Telling the other ranks is the core's: it posts the failure
// through its control channel, and their gangs abort their communicators in
// turn.
#include "backends/nccl/nccl_instance.h"

namespace gang::backends::nccl_impl {
namespace {

// NCCL reduces no int16; bool reduces as uint8 with max ("or") and min
// ("and"). Only floating types are averaged, as gang's core decides.
int supports(void*, gang_op_t op, gang_dtype_t dtype) {
  if (op < GANG_SUM || op > GANG_AVG) return 0;
  if (op == GANG_AVG) return dtype >= GANG_FLOAT16 && dtype <= GANG_FLOAT64;
  if (dtype == GANG_BOOL) return 1;
  return dtype >= GANG_INT8 && dtype <= GANG_FLOAT64;
}

const gang_backend_t kTable = {
    sizeof(gang_backend_t),
    GANG_BACKEND_ABI_VERSION,
    1u << GANG_DEVICE_CUDA,
    "nccl",
    10,
    GANG_BACKEND_STREAM_ORDERED,
    probe,
    create,
    destroy,
    supports,
    post,
    test,
    wait,
    work_free,
    poll_error,
    finalize,
    abort_instance,
    split,
    device_of,
    shrink,
};

}  // namespace
}  // namespace gang::backends::nccl_impl

extern "C" GANG_BACKEND_EXPORT const gang_backend_t* gang_backend_plugin(void) {
  return &gang::backends::nccl_impl::kTable;
}
