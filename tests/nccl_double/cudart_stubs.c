/* cudart_stubs.c - the functions of the CUDA runtime that PyTorch's CUDA
 * build links but never calls on the path gang_torch's tests take over the
 * double (cudart_torch.cc): each returns cudaErrorNotSupported. Kernel
 * launches are among them (the double runs no kernels), so a torch
 * operation that needs one raises torch's CUDA error instead of computing.
 * Written without the runtime's header: a stub takes no arguments it
 * reads, and returns the error code as cudaError_t is returned (an int). */

enum { kNotSupported = 801 }; /* cudaErrorNotSupported */

/* Records the error as the runtime's last (cudart_double.cc), so that a
 * caller checking cudaGetLastError after a kernel launch sees it. */
int gang_cuda_double_fail(int error);

/* Kernel registration, run by every CUDA library's constructors: accepted,
 * and nothing is kept. */
static void* fat_binary_handle;
void** __cudaRegisterFatBinary(void* fat_cubin) {
  (void)fat_cubin;
  return &fat_binary_handle;
}
void __cudaRegisterFatBinaryEnd(void** handle) { (void)handle; }
void __cudaUnregisterFatBinary(void** handle) { (void)handle; }
void __cudaRegisterFunction(void) {}
void __cudaRegisterVar(void) {}
unsigned __cudaPushCallConfiguration(void) { return 0; }
int __cudaPopCallConfiguration(void) { return 0; }

#define STUB(name) \
  int name(void) { return gang_cuda_double_fail(kNotSupported); }

STUB(__cudaGetKernel)
STUB(__cudaLaunchKernel)
STUB(cudaDeviceEnablePeerAccess)
STUB(cudaDeviceGetDefaultMemPool)
STUB(cudaDeviceGetGraphMemAttribute)
STUB(cudaDeviceGetPCIBusId)
STUB(cudaDeviceSetGraphMemAttribute)
STUB(cudaFuncGetAttributes)
STUB(cudaFuncSetAttribute)
STUB(cudaGetSymbolAddress)
STUB(cudaGraphAddNode)
STUB(cudaGraphConditionalHandleCreate)
STUB(cudaGraphGetNodes)
STUB(cudaGraphInstantiateWithFlags)
STUB(cudaGraphNodeGetDependencies)
STUB(cudaGraphRetainUserObject)
STUB(cudaIpcCloseMemHandle)
STUB(cudaIpcGetEventHandle)
STUB(cudaIpcGetMemHandle)
STUB(cudaIpcOpenEventHandle)
STUB(cudaIpcOpenMemHandle)
STUB(cudaKernelSetAttributeForDevice)
STUB(cudaLaunchCooperativeKernel)
STUB(cudaLaunchKernel)
STUB(cudaLaunchKernelExC)
STUB(cudaLibraryGetGlobal)
STUB(cudaLibraryGetKernel)
STUB(cudaLibraryGetKernelCount)
STUB(cudaLibraryGetManaged)
STUB(cudaLibraryGetUnifiedFunction)
STUB(cudaLibraryLoadData)
STUB(cudaLibraryLoadFromFile)
STUB(cudaLibraryUnload)
STUB(cudaMallocAsync)
STUB(cudaMallocManaged)
STUB(cudaMemPoolGetAttribute)
STUB(cudaMemPoolSetAccess)
STUB(cudaMemPoolSetAttribute)
STUB(cudaMemPoolTrimTo)
STUB(cudaMemcpyToSymbol)
STUB(cudaOccupancyMaxActiveBlocksPerMultiprocessor)
STUB(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)
STUB(cudaProfilerStart)
STUB(cudaProfilerStop)
STUB(cudaStreamBeginCaptureToGraph)
STUB(cudaStreamUpdateCaptureDependencies)
STUB(cudaUserObjectCreate)
STUB(cudaUserObjectRelease)
