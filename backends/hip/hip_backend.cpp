// The ROCm/HIP backend plugin (libtensormorph-backend-hip.so): the shared GPU kernels and table of
// backends/gpu compiled as HIP (clang -x hip, backends/hip/CMakeLists.txt) against Debian's HIP runtime.
#define TM_GPU_HIP 1
#define TM_GPU_BACKEND_NAME "hip"
#define TM_GPU_BACKEND_DESCRIPTION "AMD GPUs through ROCm/HIP (kernels shared with the CUDA backend)"
#define TM_GPU_DEVICE_KIND TM_DEVICE_GPU
// Declared, not measured: PCIe 4.0 x16; calibrate measures it.
#define TM_GPU_LINK_BYTES_PER_S 25e9
#include "gpu/gpu_backend.inl"
