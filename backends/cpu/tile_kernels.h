// TM_OP_LOD_TILE_STATS's TM_TILE_SEGMENTS method (op_contracts.h): SIMD (Highway, dynamic dispatch)
// accumulation of level-0 pyramid tiles for the floats every kernel widens to f32 exactly: f32, bf16 and
// f16. tile_stats_kernel.cpp feeds a tile one segment at a time (the part of one row that lies in it).
//
// Contract (the same as lod/tile_stats.h's TileStats): counts, min, max and abs_max exact; sum and m2 to float64
// rounding; the histogram buckets exact. The arithmetic depends only on the tile's elements and their
// positions, never on how the tensor was cut into pieces or which SIMD target runs: element i of a
// segment feeds virtual lane i % 16, and lanes are reduced in a fixed order.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Running statistics of one tile. Sums are of d = x - shift over the finite x, with shift the mean of
// the finite values of the tile's first segment rounded to f32 (0 when it has none), so m2 = sum d^2 -
// (sum d)^2 / n loses float64 rounding relative to sum d^2, which stays near m2 unless the first segment
// lies far from the rest of the tile.
struct TileSums {
  static constexpr int kLanes = 16;
  alignas(64) double sum[kLanes];
  alignas(64) double sq[kLanes];
  alignas(64) float lo[kLanes];       // finite minimum per lane (+inf when none)
  alignas(64) float hi[kLanes];       // finite maximum per lane (-inf when none)
  alignas(64) float abs_max[kLanes];  // finite |x| maximum per lane (0 when none)
  uint64_t count = 0, finite = 0, nan = 0, zero = 0;
  float shift = 0;
};

// True for the dtypes add_tile_segment takes: F32, BF16, F16.
bool tile_kernel_supports(DType dtype);

// Empties s; the next add_tile_segment sets its shift.
void start_tile(TileSums& s);

// Adds n elements of dtype at data (one segment of the tile) into s, and each finite value to
// buckets[the top 8 bits of its order key] (256 counts; pyramid.h says why). The first segment after
// start_tile sets the shift.
void add_tile_segment(DType dtype, const uint8_t* data, uint64_t n, TileSums& s, uint32_t* buckets);

// The tile's statistics; its buckets are left as they are (add_tile_segment counted them).
void finish_tile(const TileSums& s, tm_tile_stats_v1& t);

}  // namespace tmorph::cpu
