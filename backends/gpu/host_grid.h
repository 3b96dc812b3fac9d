// A sequential host emulation of the small part of the CUDA/HIP programming model the GPU backends use,
// so the very kernels nvcc and hipcc compile also build under g++ and run in CI (which has no GPU).
//
// Contract for kernels written against it: one-dimensional grids; no __syncthreads, no shared memory,
// no warp intrinsics; threads communicate only through global memory written by one launch and read by
// a later one, or through atomicAdd / atomicMax on integers. Under those rules a kernel's result does not
// depend on the order its threads run in, so running every thread one after another (block 0 thread 0,
// block 0 thread 1, ...) gives what the device gives. "Device memory" is host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
inline thread_local dim3 blockIdx, threadIdx, blockDim, gridDim;

inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old + value;
  return old;
}
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  const unsigned old = *address;
  *address = old + value;
  return old;
}
inline unsigned atomicMax(unsigned* address, unsigned value) {
  const unsigned old = *address;
  if (value > old) *address = value;
  return old;
}

// Runs every thread of the grid in order.
template <class Kernel, class... Args>
void tm_host_launch(Kernel kernel, unsigned grid, unsigned block, Args... args) {
  gridDim = dim3(grid), blockDim = dim3(block);
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < block; ++t) {
      blockIdx = dim3(b), threadIdx = dim3(t);
      kernel(args...);
    }
}
#define TM_GPU_LAUNCH(kernel, grid, block, ...) tm_host_launch(kernel, (grid), (block), __VA_ARGS__)

// ---- the runtime calls, on "device memory" that is host memory -------------------------------------
enum gpuError_t { gpuSuccess = 0, gpuErrorMemoryAllocation = 2, gpuErrorInvalidValue = 1, gpuErrorNoDevice = 100,
                  gpuErrorInsufficientDriver = 35 };
struct gpuDeviceProp_t {
  char name[256];
  size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int memoryBusWidth;   // bits
  int memoryClockRate;  // kHz
  int pciBusID;
};
// The emulated device's memory: what the emulation lets the planner think it has (1 GiB).
constexpr size_t kHostGridMemoryBytes = size_t{1} << 30;

inline gpuError_t gpuGetDeviceCount(int* count) {
  *count = 1;
  return gpuSuccess;
}
inline gpuError_t gpuGetDeviceProperties(gpuDeviceProp_t* p, int device) {
  if (device != 0) return gpuErrorInvalidValue;
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "host grid emulation");
  p->totalGlobalMem = kHostGridMemoryBytes;
  p->multiProcessorCount = 1;
  return gpuSuccess;
}
inline gpuError_t gpuDriverGetVersion(int* v) { return *v = 1, gpuSuccess; }
inline gpuError_t gpuRuntimeGetVersion(int* v) { return *v = 1, gpuSuccess; }
inline gpuError_t gpuSetDevice(int device) { return device == 0 ? gpuSuccess : gpuErrorInvalidValue; }
inline gpuError_t gpuMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? gpuSuccess : gpuErrorMemoryAllocation;
}
inline gpuError_t gpuFree(void* p) { return std::free(p), gpuSuccess; }
inline gpuError_t gpuMemset(void* p, int v, size_t n) { return std::memset(p, v, n), gpuSuccess; }
inline gpuError_t gpuMemcpyHostToDevice(void* d, const void* s, size_t n) { return std::memcpy(d, s, n), gpuSuccess; }
inline gpuError_t gpuMemcpyDeviceToHost(void* d, const void* s, size_t n) { return std::memcpy(d, s, n), gpuSuccess; }
inline gpuError_t gpuDeviceSynchronize() { return gpuSuccess; }
inline gpuError_t gpuGetLastError() { return gpuSuccess; }
inline const char* gpuGetErrorString(gpuError_t e) { return e == gpuSuccess ? "no error" : "emulated error"; }
inline const char* gpuGetErrorName(gpuError_t e) { return e == gpuSuccess ? "gpuSuccess" : "gpuError"; }
