// double_checks.h - what the CUDA runtime double exports besides CUDA's
// own functions: the strict mode's breach report and what the NCCL double
// and the tests ask it. Not CUDA's; test code only.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Prints "<who> (strict): <message>" and aborts the process: a breach of
// the rules the real libraries enforce (or leave undefined).
__attribute__((format(printf, 2, 3), noreturn)) void gang_double_breach(const char* who,
                                                                          const char* fmt, ...);
// 1 when GANG_DOUBLE_STRICT=1.
int gang_double_strict(void);
// The calling thread's current device.
int gang_cuda_double_current_device(void);
// The device of a stream (the legacy stream: the current device's).
int gang_cuda_double_stream_device(cudaStream_t s);
// 1 while the stream is capturing.
int gang_cuda_double_stream_capturing(cudaStream_t s);
// The device of the allocation holding [p, p + len), or -1 if no
// cudaMalloc'd allocation holds it (host memory).
int gang_cuda_double_pointer_device(const void* p, size_t len);
// cudaEventCreate(WithFlags) calls so far in this process.
long gang_cuda_double_events_created(void);
// Records `error` as the calling thread's last error and returns it (the
// runtime's functions the double only stubs fail through it).
int gang_cuda_double_fail(int error);
// Waits until every stream of the device (its legacy stream too) has run
// what was queued on it so far, as a device-wide synchronisation does;
// streams being captured are left alone.
void gang_cuda_double_device_drain(int device);

#ifdef __cplusplus
}
#endif
