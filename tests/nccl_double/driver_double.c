/* driver_double.c - libcuda.so.1 of the double: the CUDA driver functions
 * PyTorch's CUDA build links (its NVRTC wrapper, libcaffe2_nvrtc.so, needs
 * libcuda.so.1 at load, and torch loads it when CUDA starts). A context is
 * said to exist on every device, so torch takes each for initialised;
 * everything else returns CUDA_ERROR_NOT_SUPPORTED: the double runs no
 * kernels and compiles none. Written without the driver's header: a stub
 * reads no argument, and returns CUresult as an int. */

enum { kSuccess = 0, kNotSupported = 801 };

static int context; /* the one context of every device */

int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return kSuccess;
}

int cuCtxGetCurrent(void** ctx) {
  *ctx = &context;
  return kSuccess;
}

int cuCtxSetCurrent(void* ctx) {
  (void)ctx;
  return kSuccess;
}

int cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  (void)device;
  *flags = 0;
  *active = 1;
  return kSuccess;
}

int cuDevicePrimaryCtxRetain(void** ctx, int device) {
  (void)device;
  *ctx = &context;
  return kSuccess;
}

int cuGetErrorString(int error, const char** text) {
  *text = error == kSuccess ? "no error (cuda driver double)"
                            : "operation not supported (cuda driver double: no kernels)";
  return kSuccess;
}

#define STUB(name) \
  int name(void) { return kNotSupported; }

STUB(cuDeviceGetAttribute)
STUB(cuFuncGetAttribute)
STUB(cuFuncSetAttribute)
STUB(cuFuncSetCacheConfig)
STUB(cuLaunchCooperativeKernel)
STUB(cuLaunchKernel)
STUB(cuLinkAddData_v2)
STUB(cuLinkComplete)
STUB(cuLinkCreate_v2)
STUB(cuModuleGetFunction)
STUB(cuModuleLoad)
STUB(cuModuleLoadData)
STUB(cuModuleLoadDataEx)
STUB(cuModuleUnload)
STUB(cuOccupancyMaxActiveBlocksPerMultiprocessor)
STUB(cuPointerGetAttribute)
STUB(cuTensorMapEncodeTiled)
