// Virtual detector geometry on a detector frame of rows × cols pixels (after any detector crop and bin):
// the bright-field disk, annular masks and user masks, as sorted pixel-index lists (row-major).
//
// Contract (docs/stem.md, "Products"):
// - Annulus: pixel (k, l) belongs when inner <= d <= outer (both ends inclusive), d computed in float32:
//   d = sqrtf(dr*dr + dc*dc), dr = float(k) - center_row, dc = float(l) - center_col.
// - Rectangle: pixel (k, l) belongs when r0 <= k < r1 and c0 <= l < c1 (half-open, detector pixel indices of the
//   output frame; no disk involved). It must be non-empty (r0 < r1, c0 < c1) and lie inside the frame
//   (r1 <= rows, c1 <= cols).
// - Presets, from the bright-field radius r: BF [0, r], ABF [r/2, r], ADF [r, 2r], HAADF [2r, 4r], DF [r, inf).
// - Bright-field disk: threshold the mean pattern at its mean + population std; the disk's centre is the
//   centroid of the pixels strictly above the threshold (unweighted, in pixel index units) and its radius
//   sqrt(area / pi), area = their count.
// - mrad to pixels: r_px = mrad / (semi_angle_mrad / bf_radius_px).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {

struct BrightFieldDisk {
  double row = 0, col = 0, radius = 0;
  uint64_t area = 0;
  double threshold = 0;
};

// Throws Error(BadInput) when no pixel lies above the threshold (a flat or empty pattern).
BrightFieldDisk detect_bright_field_disk(const std::vector<double>& mean_pattern, uint64_t rows, uint64_t cols);

// Validates the radii (inner >= 0, outer > 0, inner <= outer; Error(InvalidArgument) otherwise) and the
// result (no pixel inside: Error(InvalidArgument) naming the centre, radii and detector size).
std::vector<uint32_t> annulus_pixels(uint64_t rows, uint64_t cols, double center_row, double center_col, double inner, double outer);

// A rectangle of detector pixels {r0, c0, r1, c1}: rows [r0, r1), columns [c0, c1) (the contract above).
struct DetectorRect {
  uint64_t r0 = 0, c0 = 0, r1 = 0, c1 = 0;
};

// The rectangle's pixels (sorted, row-major). Throws Error(InvalidArgument) naming the rectangle and the detector
// size when it is empty or reaches outside the rows × cols frame.
std::vector<uint32_t> rectangle_pixels(uint64_t rows, uint64_t cols, const DetectorRect& rect);

// The preset's [inner, outer] for bright-field radius r; nullopt for a name that is not a preset
// (preset_radii(ProductKind, r) of product_kind.h, by name).
std::optional<std::pair<double, double>> preset_radii(const std::string& name, double r);

// A user mask of exactly rows × cols from a .npy (bool or any integer/float dtype, C order; nonzero =
// inside) or a .png (8/16-bit, converted to grey; nonzero = inside). Errors name the file and what differs.
std::vector<uint32_t> mask_pixels_from_file(const std::string& path, uint64_t rows, uint64_t cols);

// Every pixel of the frame not in `pixels` (sorted).
std::vector<uint32_t> complement_pixels(const std::vector<uint32_t>& pixels, uint64_t frame_pixels);

}  // namespace tmorph
