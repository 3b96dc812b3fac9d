// One 4-D STEM product of an acquisition, as every face computes it (the CLI's `stem bf|…|mean-dp`, next the
// viewer and the Python module): which passes it needs, the disk and detector through the domain's rules
// (detector_geometry.h), the DPC rotation (dpc.h), FFT views, and the values with their report. A prepared
// cache entry (product_cache.h), when the caller found one, stands in for the passes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/calibration.h"
#include "stem/products/detector_geometry.h"
#include "stem/products/dpc.h"
#include "stem/load.h"
#include "stem/products/product_cache.h"
#include "stem/products/product_kind.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct ProductSpec {
  ProductKind kind = ProductKind::bf;
  std::optional<ProductKind> of;          // fft: the product transformed (mean_dp or a virtual image; default mean_dp)
  bool max_pattern = false;               // mean_dp: the max pattern (uint32) instead of the mean
  LoadRequest load;                       // threads and memory budget matter only when computing
  DiskRequest disk;                       // unbinned pixels; detected where not given
  DetectorRequest detector;               // for the source kind (its `kind` is set from the spec)
  Override semiangle_mrad, angle_per_pixel;
  DpcRotationRequest rotation;            // dpc, idpc
};

// The product whose passes run: `of` for fft (default mean_dp), else the kind. Throws InvalidArgument when fft's
// source cannot be transformed.
ProductKind product_source(const ProductSpec& spec);

// Whether a prepared cache entry can answer this spec (the preset disk and detector, no overrides).
bool product_served_by_prepared(const ProductSpec& spec);

struct ProductOutput {
  std::vector<uint64_t> shape;
  // The exact numbers, in the dtype the product has: float64, uint64 (virtual images), uint32 (max pattern); of
  // float frames (EMPAD) virtual images and the max pattern are float64 too.
  std::variant<std::vector<double>, std::vector<uint64_t>, std::vector<uint32_t>> values;
  std::string npy_descr;                  // "<f8", "<u8" or "<u4"
  // disk, detector (+ evaluated_as), mrad_per_pixel, rotation, summary {min, max, mean} (com: {u, v}), shape,
  // frames (mean-dp), seconds, decoded_bytes, provenance; numbers follow core/json_number.h.
  nlohmann::json report;
  std::vector<Placement> placements;      // what ran now (none for a cache hit)
};

// Computes spec's product, or reads it from `cached` (see product_served_by_prepared). `planner` is called
// only when something runs. Throws what loading, the disk and detector resolution and the passes throw.
ProductOutput compute_product(const Acquisition& acq, const ProductSpec& spec, const std::optional<PreparedProducts>& cached,
                              const std::function<const Planner&()>& planner);

// {min, max, mean} of values (null when empty).
template <class T>
nlohmann::json values_summary(const std::vector<T>& values);

}  // namespace tmorph
