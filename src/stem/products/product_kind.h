// The 4D-STEM products as an enum: their names (what the CLI subcommands and reports call them), parsing a
// name with an error that lists the valid ones, and what each product needs (a bright-field disk, a virtual
// detector, the centre of mass, a DPC rotation) and whether the prepared-products cache can hold it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmorph {

enum class ProductKind {
  bf,       // bright field: detector [0, r] around the bright-field disk
  abf,      // annular bright field: [r/2, r]
  adf,      // annular dark field: [r, 2r]
  haadf,    // high-angle annular dark field: [2r, 4r]
  df,       // dark field: [r, inf)
  mask,     // a virtual image through a custom detector (radii in px or mrad, or a user mask)
  com,      // centre of mass
  dpc,      // centre of mass, rotated (DPC)
  idpc,     // integrated DPC
  fft,      // FFT view of another product (mean_dp or a virtual image)
  mean_dp,  // mean (or max) diffraction pattern
};

// Every kind, in declaration order.
const std::vector<ProductKind>& all_product_kinds();

// "bf", "abf", …, "mean-dp" (the CLI's subcommand names; mean_dp is "mean-dp").
const char* product_name(ProductKind k);

// The kind named `name`; nullopt for an unknown name.
std::optional<ProductKind> product_kind_from_name(std::string_view name);
// The kind named `name`; Error(InvalidArgument) "<what> <name>: expected one of bf, abf, …" otherwise.
ProductKind parse_product_kind(std::string_view name, const std::string& what = "product");

// bf, abf, adf, haadf, df: an annulus given by the bright-field radius (preset_radii).
bool is_preset_detector(ProductKind k);
// The presets and mask: a scan image of one virtual detector's sums (uint64).
bool is_virtual_image(ProductKind k);
// com, dpc, idpc: computed from the centre-of-mass field.
bool is_com_field(ProductKind k);
// dpc, idpc: need the DPC rotation (found or given).
bool needs_dpc_rotation(ProductKind k);
// What fft may transform: mean_dp or a virtual image.
bool is_fft_source(ProductKind k);
// Products the prepared cache holds (around the detected disk): the presets, com, dpc, idpc and mean_dp
// (fft is cacheable when its source is).
bool cacheable(ProductKind k);

// The preset's [inner, outer] in pixels for bright-field radius r (contract in virtual_detector.h);
// nullopt for a kind that is not a preset.
std::optional<std::pair<double, double>> preset_radii(ProductKind k, double r);

}  // namespace tmorph
