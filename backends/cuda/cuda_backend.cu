// The CUDA backend plugin (libtensormorph-backend-cuda.so): the shared GPU kernels and table of
// backends/gpu compiled by nvcc for the CUDA runtime (linked statically, so the plugin loads without the
// toolkit; without a driver it is listed as unavailable with the reason).
#define TM_GPU_CUDA 1
#define TM_GPU_BACKEND_NAME "cuda"
#define TM_GPU_BACKEND_DESCRIPTION "NVIDIA GPUs through the CUDA runtime (kernels shared with the HIP backend)"
#define TM_GPU_DEVICE_KIND TM_DEVICE_GPU
// Declared, not measured: PCIe 4.0 x16 (conservative for Hopper's PCIe 5.0); calibrate measures it.
#define TM_GPU_LINK_BYTES_PER_S 25e9
#include "gpu/gpu_backend.inl"
