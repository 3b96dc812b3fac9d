// TM_OP_LOD_TILE_STATS's TM_TILE_WIDENED method (op_contracts.h), for every dtype: each row's part of a
// tile widened to float64, its statistics in 8 lanes about its first value, and the rows merged in order by
// Chan's update (the merge lod/tile_stats.h's merge_into applies between levels, to the letter).
//
// Contract: counts, min, max, abs_max and buckets exact; sum and m2 to float64 rounding, depending only on
// the tile's elements and the order of its rows.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// n elements of dtype at src as float64 (exact for every dtype but 64-bit integers beyond 2^53).
void widen_to_double(DType dtype, const uint8_t* src, uint64_t n, double* dst);

// The order bucket of each of n elements of dtype at src: the top 8 bits of its order key (op_contracts.h).
void order_buckets(DType dtype, const uint8_t* src, uint64_t n, uint8_t* dst);

// The tile of `rows` rows of `cols` elements (row r at first + r * stride bytes) into t, buckets included.
// values and keys are scratch of at least cols entries.
void widened_tile(DType dtype, const uint8_t* first, uint64_t stride, uint64_t rows, uint64_t cols, double* values,
                  uint8_t* keys, tm_tile_stats_v1& t);

}  // namespace tmorph::cpu
