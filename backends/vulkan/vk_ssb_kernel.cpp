// stem.ssb_overlap on Vulkan (quadratic variant; op_contracts.h): per batch of bright-field pixels three
// launches — correction (ssb_correct.comp), inverse DFT along rows (ssb_rows.comp), inverse DFT along
// columns with the reduction over the batch (ssb_reduce.comp) into float64 sums that stay on the device
// until the last batch. Complex64 planes and transforms (direct sums with exact twiddle indices), float64
// aperture tests, arguments and sums; the pixels are added in pixel order, so the result is deterministic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tensormorph/op_contracts.h"
#include "vk_error.h"
#include "vk_kernels.h"

namespace tmorph::vk {

namespace {

void ssb_require(bool ok, const std::string& what) {
  if (!ok) throw VkError(TM_ERR_INVALID_ARGUMENT, "stem.ssb_overlap: " + what);
}

constexpr uint64_t kAlign = 65536;  // binding offsets (a multiple of every device's alignment)
uint64_t aligned(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Workgroups of 64 for a grid-stride pass over n items.
uint32_t groups_for(const Device& device, uint64_t n) {
  const uint64_t wanted = (n + 63) / 64;
  return static_cast<uint32_t>(std::clamp<uint64_t>(wanted, 1, std::min<uint64_t>(65535, device.physical().max_workgroup_count_x)));
}

void twiddles(uint64_t n, float* out) {  // e^{+2πi m/n}, m < n, as (re, im) float pairs
  for (uint64_t m = 0; m < n; ++m) {
    const double a = 2 * M_PI * static_cast<double>(m) / static_cast<double>(n);
    out[2 * m] = static_cast<float>(std::cos(a)), out[2 * m + 1] = static_cast<float>(std::sin(a));
  }
}

}  // namespace

void run_stem_ssb_overlap(Device& device, const tm_kernel_call_v1& call, const Resident*) {
  ssb_require(call.params && call.params_size >= sizeof(tm_stem_ssb_params_v1), "missing params");
  const auto& p = *static_cast<const tm_stem_ssb_params_v1*>(call.params);
  if (p.variant != TM_SSB_QUADRATIC)
    throw VkError(TM_ERR_UNSUPPORTED, "stem.ssb_overlap: the Vulkan kernel computes the quadratic variant only "
                                      "(higher-order aberrations need float64 trigonometry; they run on the CPU)");
  ssb_require(p.rows >= 2 && p.cols >= 2 && p.rows <= (1u << 16) && p.cols <= (1u << 16), "scan outside 2 .. 65,536 per axis");
  const uint64_t R = p.rows, C = p.cols, N = R * C, half = R * (C / 2 + 1), B = p.pixels;
  ssb_require(B > 0 && p.slice_stride >= half && p.slice_stride < (uint64_t{1} << 31), "pixels or slice_stride out of range");
  ssb_require(call.element_count == 2 * B * p.slice_stride, "element_count must be 2 * pixels * slice_stride");
  ssb_require(call.output_size >= N * 32, "output too small: need rows * cols * 32 bytes");
  ssb_require(p.pixel_k && p.dc && p.nu && p.e_chi && p.row_factor && p.col_factor, "a table is missing");
  ssb_require(p.kmax2 > 0 && std::isfinite(p.kmax2), "kmax2 must be positive");

  // Pixels per batch: the batch's spectra and its two planes each fit one binding.
  const uint64_t limit = chunk_bytes(device.physical());
  ssb_require(N * 32 <= limit && p.slice_stride * 8 <= limit && N * 8 <= limit,
          "a " + std::to_string(R) + " x " + std::to_string(C) + " scan exceeds this device's " + std::to_string(limit) +
              "-byte bindings");
  const uint64_t per_batch = std::max<uint64_t>(1, std::min({B, limit / (N * 8), limit / (p.slice_stride * 8), uint64_t{1} << 20}));

  // Aux: float64 section D (kmax2, ν, the batch's pixels), then at a 64 KiB boundary the float section F
  // (ssb_common.glsl).
  const uint64_t d_bytes = (2 + 2 * N + 4 * per_batch) * 8;
  const uint64_t f_offset = aligned(d_bytes);
  const uint64_t f_values = N + R + C + per_batch * (R + C);
  Buffer& aux = device.buffer(Slot::Aux, f_offset + f_values * 8);
  auto* d = static_cast<double*>(aux.mapped);
  auto* f = reinterpret_cast<float*>(static_cast<uint8_t*>(aux.mapped) + f_offset);
  d[0] = p.kmax2, d[1] = 0;
  std::memcpy(d + 2, p.nu, N * 16);
  for (uint64_t q = 0; q < N; ++q) f[2 * q] = static_cast<float>(p.e_chi[2 * q]), f[2 * q + 1] = static_cast<float>(p.e_chi[2 * q + 1]);
  twiddles(R, f + 2 * N);
  twiddles(C, f + 2 * (N + R));

  const Buffer& planes = device.buffer(Slot::Scratch0, per_batch * N * 8);
  const Buffer& rows = device.buffer(Slot::Scratch1, per_batch * N * 8);
  const Buffer& sums = device.buffer(Slot::Output, N * 32);
  const Pipeline& correct = device.pipeline("ssb_correct", {}, 4, 20);
  const Pipeline& row_pass = device.pipeline("ssb_rows", {}, 3, 20);
  const Pipeline& reduce = device.pipeline("ssb_reduce", {}, 3, 20);
  const auto* spectra = static_cast<const float*>(call.input);

  for (uint64_t b0 = 0; b0 < B; b0 += per_batch) {
    const uint64_t nb = std::min(per_batch, B - b0);
    for (uint64_t b = 0; b < nb; ++b) {
      const double kr = p.pixel_k[2 * (b0 + b)], kc = p.pixel_k[2 * (b0 + b) + 1];
      double* px = d + 2 + 2 * N + 4 * b;
      px[0] = kr, px[1] = kc, px[2] = p.dc[b0 + b], px[3] = kr * kr + kc * kc <= p.kmax2 ? 1.0 : 0.0;
    }
    float* row_f = f + 2 * (N + R + C);
    float* col_f = row_f + 2 * nb * R;
    for (uint64_t k = 0; k < 2 * nb * R; ++k) row_f[k] = static_cast<float>(p.row_factor[2 * b0 * R + k]);
    for (uint64_t k = 0; k < 2 * nb * C; ++k) col_f[k] = static_cast<float>(p.col_factor[2 * b0 * C + k]);
    const uint64_t upload = device.write_input(spectra + 2 * b0 * p.slice_stride, nb * p.slice_stride * 8);
    const Buffer& input = device.buffer(Slot::Input, 0);

    uint32_t push[5] = {static_cast<uint32_t>(nb), static_cast<uint32_t>(R), static_cast<uint32_t>(C),
                        static_cast<uint32_t>(p.slice_stride), groups_for(device, nb * N)};
    Dispatch c;
    c.pipeline = &correct;
    c.bindings = {{&input, 0}, {&planes, 0}, {&aux, 0}, {&aux, f_offset}};
    c.push = push;
    c.groups = push[4];
    c.upload_bytes = upload;
    device.run(c);

    Dispatch r;
    r.pipeline = &row_pass;
    r.bindings = {{&planes, 0}, {&rows, 0}, {&aux, f_offset}};
    r.push = push;
    r.groups = push[4];
    device.run(r);

    push[4] = groups_for(device, N);
    const bool last = b0 + nb == B;
    Dispatch s;
    s.pipeline = &reduce;
    s.bindings = {{&rows, 0}, {&sums, 0}, {&aux, f_offset}};
    s.push = push;
    s.groups = push[4];
    if (b0 == 0) s.zero_first = {{&sums, N * 32}};
    s.result_bytes = last ? N * 32 : 0;
    device.run(s);
  }
  std::memcpy(call.output, device.results(), N * 32);
}

}  // namespace tmorph::vk
