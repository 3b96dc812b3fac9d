#include "stem/products/product_kind.h"

#include <limits>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

struct Entry {
  ProductKind kind;
  const char* name;
};

constexpr Entry kEntries[] = {
    {ProductKind::bf, "bf"},     {ProductKind::abf, "abf"},   {ProductKind::adf, "adf"},   {ProductKind::haadf, "haadf"},
    {ProductKind::df, "df"},     {ProductKind::mask, "mask"}, {ProductKind::com, "com"},   {ProductKind::dpc, "dpc"},
    {ProductKind::idpc, "idpc"}, {ProductKind::fft, "fft"},   {ProductKind::mean_dp, "mean-dp"},
};

}  // namespace

const std::vector<ProductKind>& all_product_kinds() {
  static const std::vector<ProductKind> all = [] {
    std::vector<ProductKind> v;
    for (const Entry& e : kEntries) v.push_back(e.kind);
    return v;
  }();
  return all;
}

const char* product_name(ProductKind k) {
  for (const Entry& e : kEntries)
    if (e.kind == k) return e.name;
  return "?";
}

std::optional<ProductKind> product_kind_from_name(std::string_view name) {
  for (const Entry& e : kEntries)
    if (name == e.name) return e.kind;
  return std::nullopt;
}

ProductKind parse_product_kind(std::string_view name, const std::string& what) {
  if (auto k = product_kind_from_name(name)) return *k;
  std::string names;
  for (const Entry& e : kEntries) names += std::string(names.empty() ? "" : ", ") + e.name;
  throw Error(ErrorKind::InvalidArgument, what + " " + std::string(name) + ": expected one of " + names);
}

bool is_preset_detector(ProductKind k) {
  return k == ProductKind::bf || k == ProductKind::abf || k == ProductKind::adf || k == ProductKind::haadf || k == ProductKind::df;
}

bool is_virtual_image(ProductKind k) { return is_preset_detector(k) || k == ProductKind::mask; }

bool is_com_field(ProductKind k) { return k == ProductKind::com || k == ProductKind::dpc || k == ProductKind::idpc; }

bool needs_dpc_rotation(ProductKind k) { return k == ProductKind::dpc || k == ProductKind::idpc; }

bool is_fft_source(ProductKind k) { return k == ProductKind::mean_dp || is_virtual_image(k); }

bool cacheable(ProductKind k) { return is_preset_detector(k) || is_com_field(k) || k == ProductKind::mean_dp; }

std::optional<std::pair<double, double>> preset_radii(ProductKind k, double r) {
  switch (k) {
    case ProductKind::bf: return std::pair{0.0, r};
    case ProductKind::abf: return std::pair{r / 2, r};
    case ProductKind::adf: return std::pair{r, 2 * r};
    case ProductKind::haadf: return std::pair{2 * r, 4 * r};
    case ProductKind::df: return std::pair{r, std::numeric_limits<double>::infinity()};
    default: return std::nullopt;
  }
}

}  // namespace tmorph
