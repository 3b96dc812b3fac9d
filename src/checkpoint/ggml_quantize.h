// float32 values to ggml block bytes: the writer's half of the block formats whose readers are the CPU
// backend's dequantizers (backends/cpu/dequant). Used to write quantized GGUF files (checkpoint/gguf_export.h).
//
// Layouts (bytes, little-endian; fp16 is IEEE binary16), as ggml's block structs:
//   Q8_0 (34 bytes / 32 values): fp16 d, int8 qs[32].                 x = d * q
//   Q5_0 (22 bytes / 32 values): fp16 d, u32 qh, u8 qs[16].           x = d * (q - 16), q 5 bits: value j < 16
//        has its low 4 bits in the low nibble of qs[j] and bit 4 at qh bit j; value j + 16 in the high nibble of
//        qs[j] and qh bit j + 16.
//   Q4_K (144 bytes / 256 values): fp16 d, fp16 dmin, u8 scales[12], u8 qs[128]. Eight sub-blocks of 32 values
//        each with a 6-bit scale sc and min m (packed as ggml's get_scale_min_k4 reads them: sub-blocks 0-3 in the
//        low 6 bits of scales[j] (sc) and scales[j + 4] (m); 4-7 with their low 4 bits in scales[j + 4] (sc low
//        nibble, m high nibble) and their top 2 bits in the top bits of scales[j - 4] (sc) and scales[j] (m)).
//        x = (d * sc) * q - (dmin * m), q 4 bits; bytes 32c .. 32c + 31 of qs hold sub-block 2c in their low
//        nibbles and 2c + 1 in their high nibbles.
//
// Contract: `n` is a whole number of blocks (32 or 256 values; Internal error otherwise); `out` has room for
// n / block_values * block_bytes bytes. No ggml block holds NaN or Inf: before a block (Q4_K: each sub-block of
// 32) is quantized, NaN is replaced by 0 and +/-Inf by +/- the largest finite magnitude among its values, so the
// scales come from finite values and every finite neighbour stays meaningful. Deterministic: the bytes depend on
// the values only (no threads here; callers split by blocks).
#pragma once

#include <cstdint>

namespace tmorph {

// IEEE binary16 bits of f, rounded to nearest even (overflow to infinity, NaN stays NaN), and back (exact).
uint16_t f32_to_fp16_bits(float f);
float fp16_bits_to_f32(uint16_t h);

// ggml's Q8_0: per 32 values d = amax / 127 (stored fp16), q = round(x / d) (ties away from zero).
void quantize_q8_0(const float* x, uint64_t n, uint8_t* out);

// ggml's Q5_0: per 32 values the value of largest magnitude, `max` (with its sign), gives d = max / -16,
// q = clamp(trunc(x / d + 16.5), 0, 31), so `max` itself is code 0 and the other side reaches code 31 at most.
void quantize_q5_0(const float* x, uint64_t n, uint8_t* out);

// ggml's Q4_K. Each sub-block's scale and min are fitted by a small search: candidate steps around
// (max - min) / 15 (min = min(0, smallest value)), each quantized and then refined by the least-squares scale and
// min for those codes (min kept <= 0), the one of least squared error kept. The eight scales and mins are then
// quantized to 6 bits against the super-block's largest (d = max scale / 63, dmin = max min / 63, both fp16) and
// every code recomputed with the stored d * sc and dmin * m, as ggml does.
void quantize_q4_k(const float* x, uint64_t n, uint8_t* out);

}  // namespace tmorph
