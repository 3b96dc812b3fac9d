// Batched inverse 2-D complex-to-complex float FFTs in place on device memory, for stem.ssb_overlap: cuFFT
// (loaded with dlopen on first use, so the plugin loads where the toolkit's libcufft is absent and only this
// kernel then fails, naming the library), FFTW for the host emulation. HIP has none here: Debian 12 ships no
// hipFFT, so the HIP plugin declares no SSB kernel (TM_GPU_HAS_FFT 0). Included by gpu_backend.inl after
// GpuError; unnormalised (FFTW_BACKWARD / CUFFT_INVERSE), like numpy's ifft2 times rows * cols.
#pragma once

#if defined(TM_GPU_CUDA)
#include <cufft.h>
#include <dlfcn.h>
#define TM_GPU_HAS_FFT 1
#elif defined(TM_GPU_HOST)
#include <fftw3.h>
#define TM_GPU_HAS_FFT 1
#else
#define TM_GPU_HAS_FFT 0
#endif

#if TM_GPU_HAS_FFT
namespace tmorph::gpu {
namespace {

#if defined(TM_GPU_CUDA)
struct CufftApi {
  decltype(&cufftPlanMany) plan_many = nullptr;
  decltype(&cufftExecC2C) exec = nullptr;
  decltype(&cufftDestroy) destroy = nullptr;
  std::string missing;
};
const CufftApi& cufft() {
  static const CufftApi api = [] {
    CufftApi a;
    void* lib = nullptr;
    for (const char* name : {"libcufft.so.12", "libcufft.so.11", "libcufft.so"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return a.missing = "libcufft.so.12 (the CUDA toolkit's cuFFT) is not installed", a;
    a.plan_many = reinterpret_cast<decltype(a.plan_many)>(dlsym(lib, "cufftPlanMany"));
    a.exec = reinterpret_cast<decltype(a.exec)>(dlsym(lib, "cufftExecC2C"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(dlsym(lib, "cufftDestroy"));
    if (!a.plan_many || !a.exec || !a.destroy) a.missing = "libcufft lacks cufftPlanMany/cufftExecC2C/cufftDestroy";
    return a;
  }();
  return api;
}

class GpuFft {
 public:
  GpuFft(uint64_t rows, uint64_t cols, uint64_t batch) {
    const CufftApi& api = cufft();
    if (!api.missing.empty()) throw GpuError(TM_ERR_UNSUPPORTED, "stem.ssb_overlap needs cuFFT: " + api.missing);
    int n[2] = {static_cast<int>(rows), static_cast<int>(cols)};
    const int dist = static_cast<int>(rows * cols);
    if (api.plan_many(&plan_, 2, n, nullptr, 1, dist, nullptr, 1, dist, CUFFT_C2C, static_cast<int>(batch)) != CUFFT_SUCCESS)
      throw GpuError(TM_ERR_DEVICE, "cuFFT could not plan " + std::to_string(batch) + " transforms of " + std::to_string(rows) +
                                        " x " + std::to_string(cols));
    planned_ = true;
  }
  ~GpuFft() {
    if (planned_) cufft().destroy(plan_);
  }
  GpuFft(const GpuFft&) = delete;
  GpuFft& operator=(const GpuFft&) = delete;
  void inverse(float* data) {
    auto* z = reinterpret_cast<cufftComplex*>(data);
    if (cufft().exec(plan_, z, z, CUFFT_INVERSE) != CUFFT_SUCCESS) throw GpuError(TM_ERR_DEVICE, "cufftExecC2C failed");
  }

 private:
  cufftHandle plan_ = 0;
  bool planned_ = false;
};
#else
class GpuFft {
 public:
  GpuFft(uint64_t rows, uint64_t cols, uint64_t batch) : rows_(rows), cols_(cols), batch_(batch) {}
  GpuFft(const GpuFft&) = delete;
  GpuFft& operator=(const GpuFft&) = delete;
  // Planned per call on the data (FFTW_ESTIMATE does not touch it); FFTW's planner is not thread-safe, and
  // the backend's calls are serialised by its mutex.
  void inverse(float* data) {
    int n[2] = {static_cast<int>(rows_), static_cast<int>(cols_)};
    const int dist = static_cast<int>(rows_ * cols_);
    auto* z = reinterpret_cast<fftwf_complex*>(data);
    fftwf_plan plan = fftwf_plan_many_dft(2, n, static_cast<int>(batch_), z, nullptr, 1, dist, z, nullptr, 1, dist, FFTW_BACKWARD,
                                          FFTW_ESTIMATE);
    if (!plan) throw GpuError(TM_ERR_INTERNAL, "FFTW could not plan the emulated transform");
    fftwf_execute(plan);
    fftwf_destroy_plan(plan);
  }

 private:
  uint64_t rows_, cols_, batch_;
};
#endif

}  // namespace
}  // namespace tmorph::gpu
#endif
