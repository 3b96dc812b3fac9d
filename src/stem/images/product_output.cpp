#include "stem/images/product_output.h"

#include <fstream>

#include "core/npy.h"
#include "render/cell_image.h"
#include "render/colour_bar_ticks.h"
#include "tensormorph/error.h"

namespace tmorph {

ProductPng write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                             const std::vector<double>& v, const ProductDisplay& display, const Planner& planner) {
  const CellImage img = render_product_image(shape, v, display, planner);
  write_labelled_png(path, img,
                     cell_image_text(img, CellStat::Mean, {{"tensormorph:product", product}, {"tensormorph:shape", nlohmann::json(shape).dump()}}),
                     img.params.transform == Transform::Linear ? product : product + " " + std::string(transform_name(img.params.transform)));
  return {{{"colormap", img.params.colormap->name}, {"transform", transform_name(img.params.transform)},
           {"limits", {img.params.limits.lo, img.params.limits.hi}}, {"histogram", img.histogram.counts}},
          img.placement};
}

void write_product_npy(const std::string& path, const std::string& descr, const std::vector<uint64_t>& shape,
                       const void* data, uint64_t bytes) {
  const std::string preamble = npy_preamble(descr, shape);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, path + ": cannot create");
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw Error(ErrorKind::Io, path + ": write failed");
}

}  // namespace tmorph
