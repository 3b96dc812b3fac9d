#include "cli/product_output.h"

#include <tuple>
#include <utility>

#include "cli/number_lists.h"

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

void write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                       const std::vector<double>& v, const ProductDisplayFlags& flags, const Planner& planner,
                       nlohmann::json& report, std::vector<Placement>& placements, const ProductFigure& figure) {
  ProductPng png = tmorph::write_product_png(path, product, shape, v, flags.display(), planner, figure);
  placements.push_back(std::move(png.placement));
  report["display"] = std::move(png.display);
}

}  // namespace tmorph::cli
