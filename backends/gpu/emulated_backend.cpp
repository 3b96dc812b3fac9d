// The GPU backends' kernels and table under the host grid emulation (host_grid.h), built by g++ as the
// test plugin "gpuemu" (libtensormorph-backend-gpuemu.so in build/tests/gpu-emulated, never installed):
// CI has no GPU, so this is how the very source nvcc and hipcc compile is run against the CPU reference
// (tests/unit/gpu_kernels_test.cpp). It models a software adapter: slow, honest, one device.
#define TM_GPU_HOST 1
#define TM_GPU_BACKEND_NAME "gpuemu"
#define TM_GPU_BACKEND_DESCRIPTION "the CUDA/HIP kernels run on the host under a sequential grid emulation (tests only)"
#define TM_GPU_DEVICE_KIND TM_DEVICE_SOFTWARE_ADAPTER
#define TM_GPU_LINK_BYTES_PER_S 10e9
#include "gpu_backend.inl"
