// The product commands' and SSB's output flags (--colormap, --transform, --limits) and the call that writes OUT.png
// with them; the writing itself (PNG, .npy and TIFF) is the STEM domain's (stem/images/product_output.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/output_format.h"
#include "core/npy.h"
#include "stem/images/product_output.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph::cli {

struct ProductDisplayFlags {
  std::string colormap, transform = "linear", limits;
  void add_to(CLI::App* cmd);
  // The flags as the renderer's request; throws InvalidArgument for a bad transform or limits.
  ProductDisplay display() const;
};

// What `stem <product> -o` and `stem ssb -o` write (cli/output_format.h: the extension decides).
inline const std::vector<OutputFormat> kProductOutputs = {OutputFormat::npy, OutputFormat::png, OutputFormat::tiff};

// OUT.png through tmorph::write_product_png with the flags' display (gray by default, RdBu_r when values are
// negative). Adds `display` to the report and the colour op's placement to `placements`. (OUT.npy and OUT.tif:
// tmorph::write_product_npy and write_product_tiff, found from this namespace.)
void write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                       const std::vector<double>& values, const ProductDisplayFlags& flags, const Planner& planner,
                       nlohmann::json& report, std::vector<Placement>& placements, const ProductFigure& figure);

}  // namespace tmorph::cli
