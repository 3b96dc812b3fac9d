#include "stem/products/product_run.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/json_number.h"
#include "stem/products/products.h"
#include "tensormorph/error.h"

namespace tmorph {

template <class T>
nlohmann::json values_summary(const std::vector<T>& v) {
  if (v.empty()) return nullptr;
  double lo = static_cast<double>(v[0]), hi = lo, sum = 0;
  for (T x : v) lo = std::min(lo, static_cast<double>(x)), hi = std::max(hi, static_cast<double>(x)), sum += static_cast<double>(x);
  return {{"min", json_number(lo)}, {"max", json_number(hi)}, {"mean", json_number(sum / static_cast<double>(v.size()))}};
}
template nlohmann::json values_summary(const std::vector<double>&);
template nlohmann::json values_summary(const std::vector<uint64_t>&);
template nlohmann::json values_summary(const std::vector<uint32_t>&);

ProductKind product_source(const ProductSpec& spec) {
  if (spec.kind != ProductKind::fft) return spec.kind;
  const ProductKind of = spec.of.value_or(ProductKind::mean_dp);
  if (!is_fft_source(of))
    throw Error(ErrorKind::InvalidArgument, "fft of " + std::string(product_name(of)) +
                                                ": expected mean-dp, bf, abf, adf, haadf, df or mask");
  return of;
}

bool product_served_by_prepared(const ProductSpec& spec) {
  DetectorRequest detector = spec.detector;
  detector.kind = product_source(spec);
  return served_by_prepared(detector.kind, spec.disk, detector);
}

namespace {

template <class T>
void set_values(ProductOutput& out, std::vector<uint64_t> shape, std::vector<T> values, const char* descr) {
  out.report["summary"] = values_summary(values);
  out.report["shape"] = shape;
  out.shape = std::move(shape);
  out.npy_descr = descr;
  out.values = std::move(values);
}

}  // namespace

ProductOutput compute_product(const Acquisition& acq, const ProductSpec& spec, const std::optional<PreparedProducts>& cached,
                              const std::function<const Planner&()>& planner) {
  const ProductKind source = product_source(spec);
  ProductOutput out;
  nlohmann::json& report = out.report;
  const auto t0 = std::chrono::steady_clock::now();
  ProductRequest req;
  req.load = spec.load;
  // A cache hit stands in for the pass: its arrays, its provenance, no placement (nothing ran now).
  const auto from_cache = [&]() {
    ProductResult r = cached->sums;
    r.placements.clear();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.decoded_bytes = 0;
    return r;
  };
  const auto done = [&](const ProductResult& r) {
    out.placements.insert(out.placements.end(), r.placements.begin(), r.placements.end());
    // The whole product (the disk's pattern pass included); the sums' pass alone is pass_seconds.
    report["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report["pass_seconds"] = r.seconds;
    report["decoded_bytes"] = r.decoded_bytes;
    report["provenance"] = r.load_provenance;
    if (!r.ranks.empty()) report["ranks"] = r.ranks;
    if (!acq.problems.empty()) report["acquisition_problems"] = acq.problems_report();
  };

  if (source == ProductKind::mean_dp) {
    req.frame_sums = false, req.pattern = true;
    const ProductResult r = cached ? from_cache() : compute_products(acq, req, planner());
    done(r);
    std::vector<uint64_t> shape = {r.frame_shape[0], r.frame_shape[1]};
    if (spec.kind == ProductKind::fft) {
      set_values(out, shape, fft_view(mean_pattern(r), shape[0], shape[1]), "<f8");
    } else if (spec.max_pattern && r.floating) {
      set_values(out, shape, r.pattern_max_f, "<f8");
    } else if (spec.max_pattern) {
      set_values(out, shape, r.pattern_max, "<u4");
    } else {
      set_values(out, shape, mean_pattern(r), "<f8");
      report["frames"] = r.positions;
    }
  } else if (is_virtual_image(source)) {
    DetectorRequest detector_request = spec.detector;
    detector_request.kind = source;
    ProductResult r;
    if (cached) {
      const PreparedImage prepared = prepared_image(*cached, source, acq, req.load, spec.semiangle_mrad, spec.angle_per_pixel);
      report["disk"] = to_json(prepared.disk);
      report["detector"] = prepared.detector;
      r = from_cache();
      r.images = {cached->sums.images.at(prepared.index)};
      r.evaluated_as = {cached->sums.evaluated_as.at(prepared.index)};
    } else {
      const DetectorGeometry geometry = resolve_detector_geometry(acq, req.load, spec.disk, spec.semiangle_mrad, spec.angle_per_pixel,
                                                                  planner(), &out.placements);
      const LoadPlan plan = plan_load(acq, req.load);
      const ResolvedDetector detector = resolve_virtual_detector(detector_request, geometry.disk.disk,
                                                                 {plan.output_shape[2], plan.output_shape[3]}, geometry.angle_per_pixel);
      report["disk"] = to_json(geometry.disk);
      report["detector"] = to_json(detector);
      if (detector.given_in == "mrad") report["mrad_per_pixel"] = detector.angle_per_pixel.value;
      req.detectors.push_back(detector.pixels);
      req.com = false;  // a virtual image needs only its detector's sums (and the total when it is dense)
      r = compute_products(acq, req, planner());
    }
    done(r);
    report["detector"]["evaluated_as"] = r.evaluated_as[0];
    std::vector<uint64_t> shape = {r.scan_shape[0], r.scan_shape[1]};
    if (spec.kind == ProductKind::fft && r.floating)
      set_values(out, shape, fft_view(r.images_f[0], shape[0], shape[1]), "<f8");
    else if (spec.kind == ProductKind::fft)
      set_values(out, shape, fft_view(std::vector<double>(r.images[0].begin(), r.images[0].end()), shape[0], shape[1]), "<f8");
    else if (r.floating)
      set_values(out, shape, std::move(r.images_f[0]), "<f8");
    else
      set_values(out, shape, std::move(r.images[0]), "<u8");
  } else if (is_com_field(source)) {
    const ProductResult r = cached ? from_cache() : compute_products(acq, req, planner());
    done(r);
    ScanField field = center_of_mass(r);
    if (needs_dpc_rotation(source)) {
      ResolvedDpcRotation rotation = resolve_dpc_rotation(field, spec.rotation);
      report["rotation"] = to_json(rotation);
      field = std::move(rotation.rotated);
    }
    if (source == ProductKind::idpc) {
      set_values(out, {field.rows, field.cols}, integrate_dpc(field), "<f8");
    } else {
      std::vector<double> both(field.u);
      both.insert(both.end(), field.v.begin(), field.v.end());
      set_values(out, {2, field.rows, field.cols}, std::move(both), "<f8");
      report["summary"] = {{"u", values_summary(field.u)}, {"v", values_summary(field.v)}};
    }
  } else {
    throw Error(ErrorKind::InvalidArgument, std::string(product_name(source)) + ": not a product of one pass (see stem ssb)");
  }
  return out;
}

}  // namespace tmorph
