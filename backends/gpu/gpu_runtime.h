// One kernel source for CUDA, HIP and the host: the few runtime names the GPU backends use, mapped to
// the CUDA runtime (nvcc), to HIP (hipcc / clang -x hip), or to a sequential host emulation of the grid
// (host_grid.h) that CI runs under g++ to test the same kernels against the CPU reference.
//
// Exactly one of TM_GPU_CUDA, TM_GPU_HIP, TM_GPU_HOST is defined by the translation unit that includes
// this header (backends/cuda, backends/hip, backends/gpu/emulated_backend.cpp).
#pragma once

#if defined(TM_GPU_CUDA)
#include <cuda_runtime.h>
using gpuError_t = cudaError_t;
using gpuDeviceProp_t = cudaDeviceProp;
using gpuStream_t = cudaStream_t;
#define gpuSuccess cudaSuccess
#define gpuErrorNoDevice cudaErrorNoDevice
#define gpuErrorInsufficientDriver cudaErrorInsufficientDriver
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuDriverGetVersion cudaDriverGetVersion
#define gpuRuntimeGetVersion cudaRuntimeGetVersion
#define gpuSetDevice cudaSetDevice
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMemset cudaMemset
#define gpuMemcpyHostToDevice(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice)
#define gpuMemcpyDeviceToHost(dst, src, n) cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost)
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define TM_GPU_LAUNCH(kernel, grid, block, ...) kernel<<<(grid), (block)>>>(__VA_ARGS__)
#define TM_GPU_API_NAME "CUDA"

#elif defined(TM_GPU_HIP)
#include <hip/hip_runtime.h>
using gpuError_t = hipError_t;
using gpuDeviceProp_t = hipDeviceProp_t;
using gpuStream_t = hipStream_t;
#define gpuSuccess hipSuccess
#define gpuErrorNoDevice hipErrorNoDevice
#define gpuErrorInsufficientDriver hipErrorInsufficientDriver
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuDriverGetVersion hipDriverGetVersion
#define gpuRuntimeGetVersion hipRuntimeGetVersion
#define gpuSetDevice hipSetDevice
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMemset hipMemset
#define gpuMemcpyHostToDevice(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyHostToDevice)
#define gpuMemcpyDeviceToHost(dst, src, n) hipMemcpy(dst, src, n, hipMemcpyDeviceToHost)
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define TM_GPU_LAUNCH(kernel, grid, block, ...) hipLaunchKernelGGL(kernel, dim3(grid), dim3(block), 0, 0, __VA_ARGS__)
#define TM_GPU_API_NAME "HIP"

#elif defined(TM_GPU_HOST)
#include "host_grid.h"
#define TM_GPU_API_NAME "host emulation"

#else
#error "define one of TM_GPU_CUDA, TM_GPU_HIP, TM_GPU_HOST"
#endif
