// Writing a 4D-STEM product (a scan-grid array) as OUT.npy (the exact numbers) or OUT.png (an image through
// the display kernels: transform, limits, colour map, colour bar), shared by the product commands and SSB.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "render/product_image.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph::cli {

struct ProductDisplayFlags {
  std::string colormap, transform = "linear", limits;
  void add_to(CLI::App* cmd);
  // The flags as the renderer's request; throws InvalidArgument for a bad transform or limits.
  ProductDisplay display() const;
};

bool is_png(const std::string& path);


// OUT.png: one cell per value (a [2, R, C] field drawn as its two components one above the other,
// sharing limits), gray by default or RdBu_r when values are negative. Adds `display` to the report and
// the colour op's placement to `placements`. `product` names it in the PNG's metadata.
void write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                       const std::vector<double>& values, const ProductDisplayFlags& flags, const Planner& planner,
                       nlohmann::json& report, std::vector<Placement>& placements);

// OUT.npy with the values' numpy dtype `descr` ("<f8", "<u8", ...).
void write_product_npy(const std::string& path, const std::string& descr, const std::vector<uint64_t>& shape,
                       const void* data, uint64_t bytes);

}  // namespace tmorph::cli
