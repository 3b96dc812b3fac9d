// The last step of TM_OP_STEM_SSB_OVERLAP on the CPU, per bright-field pixel: the inverse transform's N complex64
// values O_q (interleaved re, im) scaled by inv_n and added into the pixel group's sums, four float64 per
// frequency q (interleaved: Σ re, Σ im, Σ arg, Σ arg²), arg by fast_atan2 (support/fast_atan2.h).
// Vectorised with Highway (dynamic dispatch); every lane does fast_atan2's operations in its order, without
// fused multiply-adds, so the sums are bit-identical to the scalar loop on every target.
#pragma once

#include <cstdint>

namespace tmorph::cpu {

// sums[4q + 0..3] += (re, im, arg, arg²) of o[2q], o[2q + 1] scaled by inv_n, for q < n.
void add_phase_sums(const float* o, uint64_t n, double inv_n, double* sums);

}  // namespace tmorph::cpu
