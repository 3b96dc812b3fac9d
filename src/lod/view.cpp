#include "lod/view.h"

#include <charconv>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

uint64_t product(const std::vector<uint64_t>& shape, size_t begin, size_t end) {
  uint64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

View2D grouped(const std::vector<uint64_t>& shape, unsigned slice_axes, unsigned row_axes) {
  View2D v;
  v.slice_axes = slice_axes;
  v.row_axes = row_axes;
  v.slices = product(shape, 0, slice_axes);
  v.rows = product(shape, slice_axes, slice_axes + row_axes);
  v.cols = product(shape, slice_axes + row_axes, shape.size());
  return v;
}

}  // namespace

View2D default_view(const std::vector<uint64_t>& shape) {
  const unsigned rank = static_cast<unsigned>(shape.size());
  if (rank <= 1) return grouped(shape, 0, 0);
  return grouped(shape, rank - 2, 1);
}

View2D parse_view(std::string_view spec, const std::vector<uint64_t>& shape) {
  const auto bad = [&](const std::string& why) {
    return Error(ErrorKind::InvalidArgument, "--view " + std::string(spec) + ": " + why);
  };
  const size_t comma = spec.find(',');
  if (comma == std::string_view::npos) throw bad("expected S,R (slice axes, row axes)");
  unsigned s = 0, r = 0;
  const auto a = std::from_chars(spec.data(), spec.data() + comma, s);
  const auto b = std::from_chars(spec.data() + comma + 1, spec.data() + spec.size(), r);
  if (a.ec != std::errc() || a.ptr != spec.data() + comma || b.ec != std::errc() || b.ptr != spec.data() + spec.size())
    throw bad("expected two non-negative integers S,R");
  if (s + r > shape.size())
    throw bad("the tensor has " + std::to_string(shape.size()) + " axes; S + R must not exceed that");
  return grouped(shape, s, r);
}

std::string view_spec(const View2D& v) { return std::to_string(v.slice_axes) + "," + std::to_string(v.row_axes); }

}  // namespace tmorph
