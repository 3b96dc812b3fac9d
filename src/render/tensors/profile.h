// A line profile of a tensor: every value of one row or one column of a slice of its 2-D view (the stored
// pyramid's view, else the default view), read exactly as float64 (dequantized, unpacked or widened as every
// reader of this project does), for the viewer's line plots and 1-D tensors.
#pragma once

#include <cstdint>
#include <vector>

#include "index/checkpoint_index.h"

namespace tmorph {

class Planner;

enum class ProfileAxis { Row, Column };

// The most values one profile may hold (32 MiB of float64); a longer row or column is refused, naming it.
constexpr uint64_t kMaxProfileValues = uint64_t{1} << 22;

struct TensorProfile {
  ProfileAxis axis = ProfileAxis::Row;
  uint64_t index = 0, slice = 0;
  uint64_t rows = 0, cols = 0, slices = 0;  // the view's
  std::vector<double> values;              // along the row (its columns) or down the column (its rows)
};

// Throws InvalidArgument naming `row`/`column` or `slice` when out of the view, and when the profile would be
// longer than kMaxProfileValues; Unavailable when no backend here reads the tensor.
TensorProfile tensor_profile(const CheckpointIndex& index, size_t i, const Planner& planner, ProfileAxis axis, uint64_t at,
                             uint64_t slice);

}  // namespace tmorph
