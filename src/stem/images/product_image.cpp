#include "stem/images/product_image.h"

#include <algorithm>

#include "lod/cells.h"
#include "tensormorph/error.h"

namespace tmorph {

DisplayRequest product_display_request(const std::vector<double>& v, const ProductDisplay& display) {
  DisplayRequest d;
  d.transform = display.transform;
  d.lo = display.lo, d.hi = display.hi;
  const bool signed_values = std::any_of(v.begin(), v.end(), [](double x) { return x < 0; });
  d.colormap = !display.colormap.empty() ? std::string_view(display.colormap) : signed_values ? "RdBu_r" : "gray";
  return d;
}

CellImage render_product_image(const std::vector<uint64_t>& shape, const std::vector<double>& v, const ProductDisplay& display,
                               const Planner& planner) {
  if (shape.empty() || shape.back() == 0 || v.empty() || v.size() % shape.back() != 0)
    throw Error(ErrorKind::InvalidArgument, "a product image needs a non-empty array whose size is a multiple of its columns");
  const uint64_t cols = shape.back(), rows = v.size() / cols;
  CellGrid g = cells_from_values([&](uint64_t r, uint64_t c0, uint64_t c1, double* out) {
    std::copy(v.begin() + static_cast<std::ptrdiff_t>(r * cols + c0), v.begin() + static_cast<std::ptrdiff_t>(r * cols + c1), out);
  }, TileRange{0, rows, 0, cols}, 1, 1);
  return render_cells(g, CellStat::Mean, product_display_request(v, display), planner);
}

}  // namespace tmorph
