#include "stem/products/detector_sweep.h"

#include <chrono>

#include "stem/products/products.h"

namespace tmorph {

SweepImages compute_sweep_images(const Acquisition& acq, const ProductSpec& base, const std::vector<DetectorRequest>& detectors,
                                 const Planner& planner) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepImages out;
  const DetectorGeometry geometry =
      resolve_detector_geometry(acq, base.load, base.disk, base.semiangle_mrad, base.angle_per_pixel, planner, &out.placements);
  const LoadPlan plan = plan_load(acq, base.load);
  ProductRequest req;
  req.load = base.load;
  req.com = false;  // only the detectors' sums (and the total when one is dense), as compute_product for mask
  for (DetectorRequest d : detectors) {
    d.kind = ProductKind::mask;
    req.detectors.push_back(
        resolve_virtual_detector(d, geometry.disk.disk, {plan.output_shape[2], plan.output_shape[3]}, geometry.angle_per_pixel).pixels);
  }
  ProductResult r = compute_products(acq, req, planner);
  out.scan_shape = r.scan_shape;
  out.images = std::move(r.images);
  out.placements.insert(out.placements.end(), r.placements.begin(), r.placements.end());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace tmorph
