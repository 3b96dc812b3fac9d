// The 2-D view in which a tensor of any rank is drawn and summarised.
//
// Default rule: a scalar is 1 x 1; a vector of n elements is one row of n; a matrix is itself; a tensor
// of rank >= 3 is a stack of 2-D slices along its leading axes (shape [a, b, ..., r, c] -> a*b*...
// slices of r x c, e.g. one per expert or head). `--view S,R` overrides it: the first S axes index the
// slices, the next R axes are merged into rows and the remaining axes into columns (row-major, so the
// view never reorders elements: element (s, r, c) is flat index (s * rows + r) * cols + c).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tmorph {

struct View2D {
  uint64_t slices = 1, rows = 1, cols = 1;
  unsigned slice_axes = 0, row_axes = 0;  // how the shape's axes were grouped (cols take the rest)
  bool operator==(const View2D&) const = default;
};

View2D default_view(const std::vector<uint64_t>& shape);

// spec "S,R" as above. Throws Error(InvalidArgument) naming the spec when S + R exceeds the rank.
View2D parse_view(std::string_view spec, const std::vector<uint64_t>& shape);

// "S,R" for a view (what parse_view reads back).
std::string view_spec(const View2D& v);

}  // namespace tmorph
