#include "cli/product_output.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <tuple>

#include "cli/number_lists.h"
#include "render/cell_image.h"
#include "render/colour_bar_ticks.h"
#include "render/product_image.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

void ProductDisplayFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--colormap", colormap, "PNG: colour map (default gray, or RdBu_r for signed values)");
  cmd->add_option("--transform", transform, "PNG: linear, log or signed-log");
  cmd->add_option("--limits", limits, "PNG: LO,HI in product units (default: the values' finite range)");
}

ProductDisplay ProductDisplayFlags::display() const {
  ProductDisplay d;
  d.colormap = colormap;
  d.transform = parse_transform(transform);
  if (!limits.empty()) std::tie(d.lo, d.hi) = parse_limits(limits);
  return d;
}

bool is_png(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".png") == 0; }

void write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                       const std::vector<double>& v, const ProductDisplayFlags& flags, const Planner& planner,
                       nlohmann::json& report, std::vector<Placement>& placements) {
  const CellImage img = render_product_image(shape, v, flags.display(), planner);
  placements.push_back(img.placement);
  write_labelled_png(path, img,
                     cell_image_text(img, CellStat::Mean, {{"tensormorph:product", product}, {"tensormorph:shape", nlohmann::json(shape).dump()}}),
                     img.params.transform == Transform::Linear ? product : product + " " + std::string(transform_name(img.params.transform)));
  report["display"] = {{"colormap", img.params.colormap->name}, {"transform", transform_name(img.params.transform)},
                       {"limits", {img.params.limits.lo, img.params.limits.hi}}, {"histogram", img.histogram.counts}};
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

}  // namespace tmorph::cli
