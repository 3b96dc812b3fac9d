// What a 4D-STEM product request asks and what it answers (products.h runs it, resident_products.h answers it
// from the resident copy): the types alone, so the two paths share them without including each other.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/load.h"
#include "tensormorph/placement.h"

namespace tmorph {

struct ProductRequest {
  LoadRequest load;                            // region, bins, masking, threads, memory budget
  std::vector<std::vector<uint32_t>> detectors;  // pixel lists (sorted) of the output frame, one image each
  std::vector<uint32_t> com_pixels;            // centre of mass over these pixels; empty: every pixel
  bool frame_sums = true;                      // detector images (and totals and CoM when `com`)
  bool com = true;                             // totals and centre-of-mass sums too (else only detector sums
                                               // are read, unless a dense detector needs the total)
  bool pattern = false;                        // mean and max diffraction patterns
  uint64_t batch_bytes = uint64_t{64} << 20;   // frames decoded per kernel call (bounded memory)
};

struct ProductResult {
  std::array<uint64_t, 2> scan_shape{};   // output scan rows, cols
  std::array<uint64_t, 2> frame_shape{};  // output detector rows, cols
  // Per scan position (row-major), when frame_sums:
  std::vector<uint64_t> totals, com_weight, com_row, com_col;
  std::vector<std::vector<uint64_t>> images;   // one per detector
  std::vector<std::string> evaluated_as;       // per detector: "direct" or "total - complement"
  // Per detector pixel, when pattern:
  std::vector<uint64_t> pattern_sum;
  std::vector<uint32_t> pattern_max;
  // Float frames (float32 such as EMPAD, or float64 bins): `floating` is true, the integer vectors above stay
  // empty and these hold the same sums in float64, each added in the fixed order of op_contracts.h (so a run
  // gives the same bits whatever the threads, batches or backend). Every detector is summed directly
  // (evaluated_as "direct": total − complement would round differently). pattern_max_f: the float maxima.
  bool floating = false;
  std::vector<double> totals_f, com_weight_f, com_row_f, com_col_f;
  std::vector<std::vector<double>> images_f;
  std::vector<double> pattern_sum_f, pattern_max_f;
  uint64_t positions = 0;
  std::vector<Placement> placements;
  nlohmann::json load_provenance;
  double seconds = 0;
  uint64_t decoded_bytes = 0;
  // Across MPI ranks (distributed_products.h): per rank {rank, host, output_scan_rows, positions, seconds,
  // decoded_bytes, placement}; empty in one process.
  nlohmann::json ranks = nlohmann::json::array();
};

}  // namespace tmorph
