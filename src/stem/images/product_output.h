// Writing a 4D-STEM product (a scan-grid array, a diffraction pattern, an SSB phase) as OUT.png (an image through the
// display kernels with its labelled colour bar), OUT.npy (the exact numbers) or OUT.tif (numbers for image tools,
// with the calibration in tags): what `stem <product> -o OUT` and `stem ssb -o OUT` write. The CLI parses the flags
// into a ProductDisplay and calls these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/calibration.h"
#include "stem/images/product_image.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct ProductPng {
  nlohmann::json display;  // colormap, transform, limits [lo, hi] (product units), histogram (counts)
  Placement placement;     // where display.colorize ran
};

// OUT.png: render_product_image's cells (a [2, R, C] field as its two components one above the other, sharing
// limits, labelled "U" and "V" in the gap before the colour bar, with the text entry tensormorph:components) with the colour bar's ticks and labels (render/colour_bar_ticks.h), titled by `product` (and the
// transform when not linear), inside `figure`'s frame (title and axes); `product` and the shape travel in the PNG's text. Throws what the renderer throws
// (a bad map or limits: InvalidArgument) and Error(Io) naming the path when it cannot be written.
// The written figure's frame of a product (render/figure_frame.h): `title` above, and axes by the grid the
// product lies on: the scan (x and y in nm when `scan_step` is known, else scan columns and rows; a [2, R, C]
// field's rows ticked for each component), the detector (pixels), or another grid (an FFT: indices).
struct ProductFigure {
  enum class Grid { scan, detector, other };
  std::string title;
  std::string units;  // what the colour bar measures ("COUNTS", "PX", "RAD"); empty: the product's name
  Grid grid = Grid::other;
  const Sourced* scan_step = nullptr;  // Å per scan step, when known
};

ProductPng write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                             const std::vector<double>& values, const ProductDisplay& display, const Planner& planner,
                             const ProductFigure& figure);

// OUT.npy: the numpy preamble for `descr` ("<f8", "<u8", ...) and `shape`, then `bytes` bytes of row-major values.
// Error(Io) naming the path when it cannot be created or written.
void write_product_npy(const std::string& path, const std::string& descr, const std::vector<uint64_t>& shape,
                       const void* data, uint64_t bytes);

// OUT.tif (image/tiff_writer.h): a [R, C] product as one page, a [2, R, C] field as two pages (its components).
// Samples: the product's integer type as it is (`descr` "<u8" / "<u4": uint64 / uint32, exact), floating-point
// products as 32-bit floats (rounded to nearest from float64: OUT.npy keeps every bit). Tags: ImageDescription is
// JSON {product, shape, samples, scan_step | null} and, when `scan_step` is known (a scan-grid product), the
// resolution in pixels per centimetre (10^8 / step in angstrom). Returns what the report records under "tiff":
// {samples, rounded_from (floats), pages, pixels_per_cm (or null), scan_step (Sourced JSON, or null)}.
// Error(Io) naming the path when it cannot be written; Error(Internal) for a descr or shape it does not take.
nlohmann::json write_product_tiff(const std::string& path, const std::string& product, const std::string& descr,
                                  const std::vector<uint64_t>& shape, const void* data, const Sourced* scan_step);

}  // namespace tmorph
