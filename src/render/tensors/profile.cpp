// Line profiles of a tensor's view (profile.h).
#include "render/tensors/profile.h"

#include <string>

#include "checkpoint/value_reader.h"
#include "tensormorph/error.h"

namespace tmorph {

TensorProfile tensor_profile(const CheckpointIndex& index, size_t i, const Planner& planner, ProfileAxis axis, uint64_t at,
                             uint64_t slice) {
  const CheckpointTensor& t = index.checkpoint().tensors[i];
  const auto info = index.load_pyramid_info(i);
  const View2D view = info ? info->layout.view : default_view(t.shape);
  const bool row = axis == ProfileAxis::Row;
  const char* what = row ? "row" : "column";
  if (slice >= view.slices)
    throw Error(ErrorKind::InvalidArgument, "slice " + std::to_string(slice) + ": the view of " + t.name + " has " + std::to_string(view.slices) + " slice(s)");
  const uint64_t extent = row ? view.rows : view.cols;
  if (at >= extent)
    throw Error(ErrorKind::InvalidArgument, std::string(what) + " " + std::to_string(at) + ": the view of " + t.name + " has " +
                                                std::to_string(extent) + " " + what + "s");
  const uint64_t length = row ? view.cols : view.rows;
  if (length > kMaxProfileValues)
    throw Error(ErrorKind::InvalidArgument, std::string("a ") + what + " of " + t.name + " holds " + std::to_string(length) +
                                                " values, over the " + std::to_string(kMaxProfileValues) + " a profile may plot");
  TensorProfile p;
  p.axis = axis, p.index = at, p.slice = slice;
  p.rows = view.rows, p.cols = view.cols, p.slices = view.slices;
  p.values.resize(length);
  ValueReader reader(index.checkpoint(), t, planner, view);
  if (row) reader.read(slice, at, 0, view.cols, p.values.data());
  else
    for (uint64_t r = 0; r < view.rows; ++r) reader.read(slice, r, at, at + 1, &p.values[r]);
  return p;
}

}  // namespace tmorph
