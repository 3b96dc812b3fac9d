#include "stem/products/resident_products.h"

#include <algorithm>
#include <chrono>

#include "stem/products/virtual_detector.h"
#include "stem/resident/resident_store.h"
#include "support/large_buffer.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kBuildBatchBytes = uint64_t{64} << 20;  // dense frames decoded per append (as the streamed passes)

struct OverBudget : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Why the copy cannot serve `load` (empty when it can).
std::string not_served(const Acquisition& acq, const LoadRequest& load) {
  if (load.detector_region) return "a detector region is read (the copy holds whole frames)";
  if (load.scan_bin != std::array<uint64_t, 2>{1, 1} || load.detector_bin != std::array<uint64_t, 2>{1, 1})
    return "frames are binned (the copy holds unbinned frames)";
  if (!load.mask_bad_pixels) return "bad pixels are not masked (the copy holds masked frames)";
  if (load.dtype != "auto" && load.dtype != dtype_name(acq.dtype)) return "frames are converted to " + load.dtype;
  if (acq.dtype != DType::U8 && acq.dtype != DType::U16 && acq.dtype != DType::U32)
    return "frames of " + std::string(dtype_name(acq.dtype)) + " (the copy holds uint8, uint16 and uint32 counts)";
  if (!acq.complete()) return "the acquisition is still being written";
  return "";
}

// One decode of the whole acquisition into a compact copy, ordered radially about the bright-field disk of its
// mean pattern (pixel order when no disk is found). The decode is placed as a streamed pass places it.
ResidentStore::Built build_copy(const Acquisition& acq, const LoadPlan& like, const LoadRequest& request, const Planner& planner,
                                uint64_t budget, std::vector<Placement>* placements) {
  LoadRequest whole;
  whole.scan_shape = like.scan_shape;
  whole.threads = request.threads;
  whole.cancel = request.cancel;
  whole.progress = request.progress;  // the build is the long part: its frames are what a progress line shows
  StemLoader loader(acq, whole);
  const LoadPlan& plan = loader.plan();
  if (const auto decode_at = place_decode(acq, loader, planner)) placements->push_back(*decode_at);
  auto copy = std::make_unique<CompactFrames>(loader.positions(), plan.output_shape[2], plan.output_shape[3]);
  const uint64_t batch = std::max<uint64_t>(1, kBuildBatchBytes / loader.position_bytes());
  LargeBuffer frames(std::min(batch, loader.positions()) * loader.position_bytes());
  for (uint64_t first = 0; first < loader.positions(); first += batch) {
    const uint64_t n = std::min(batch, loader.positions() - first);
    loader.fill(first, n, frames.get());
    copy->append(frames.get(), n, plan.output_dtype, request.threads);
    if (copy->bytes() > budget)
      throw OverBudget("the compact copy outgrew the resident budget (" + std::to_string(budget) + " bytes) after " +
                       std::to_string(copy->appended()) + " of " + std::to_string(copy->positions()) + " positions");
  }
  std::vector<double> mean(copy->pattern_sum().size());
  for (size_t i = 0; i < mean.size(); ++i)
    mean[i] = static_cast<double>(copy->pattern_sum()[i]) / static_cast<double>(copy->positions());
  try {
    const BrightFieldDisk disk = detect_bright_field_disk(mean, copy->rows(), copy->cols());
    copy->order_radially(disk.row, disk.col, request.threads);
  } catch (const Error&) {
    // No disk (a flat pattern): pixel order; annuli are then summed entry by entry.
  }
  return {std::move(copy), loader.provenance()};
}

Placement resident_placement(tm_op op, const ResidentCopyInfo& copy) {
  Placement p;
  p.op = op_name(op);
  p.backend = "cpu";
  p.device = copy.where;
  p.device_kind = "cpu";
  p.reason = "resident_data";
  p.precision = "exact";
  return p;
}

}  // namespace

std::optional<ProductResult> products_from_resident(const Acquisition& acq, const ProductRequest& req, const Planner& planner,
                                                    std::string* why) {
  const auto t0 = std::chrono::steady_clock::now();
  ResidentStore& store = ResidentStore::process();
  if (store.budget() == 0) {
    *why = "the resident store is off (stem.resident_memory is 0)";
    return std::nullopt;
  }
  if (std::string no = not_served(acq, req.load); !no.empty()) {
    *why = no;
    return std::nullopt;
  }
  const LoadPlan plan = plan_load(acq, req.load);
  const ResidentKey key{acq.master, acq.signature, plan.scan_shape[0], plan.scan_shape[1]};
  std::vector<Placement> build_placements;
  ResidentStore::Got got;
  try {
    got = store.get_or_build(key, [&](uint64_t budget) {
      return build_copy(acq, plan, req.load, planner, budget, &build_placements);
    });
  } catch (const OverBudget& e) {
    *why = e.what();
    return std::nullopt;
  }
  if (!got.copy) {
    *why = "the resident store is off (stem.resident_memory is 0)";
    return std::nullopt;
  }
  const ResidentCopyInfo& copy = *got.copy;
  const CompactFrames& frames = *copy.frames;

  ProductResult r;
  r.scan_shape = {plan.output_shape[0], plan.output_shape[1]};
  r.frame_shape = {plan.output_shape[2], plan.output_shape[3]};
  const Box& s = plan.scan_region;
  std::vector<uint64_t> positions;
  positions.reserve(plan.frames);
  for (uint64_t row = s.r0; row < s.r1; ++row)
    for (uint64_t col = s.c0; col < s.c1; ++col) positions.push_back(row * plan.scan_shape[1] + col);
  r.positions = positions.size();
  const uint64_t pixels = r.frame_shape[0] * r.frame_shape[1];
  const unsigned threads = std::max(1u, req.load.threads);
  if (req.frame_sums) {
    // The streamed pass computes totals and centre-of-mass sums when asked, or when a dense detector needs the
    // total; the same fields are filled here (zeros otherwise), so the results match field for field.
    const bool dense = std::any_of(req.detectors.begin(), req.detectors.end(),
                                   [&](const auto& d) { return d.size() > pixels / 2 && d.size() < pixels; });
    const bool fixed = req.com || dense;
    CompactFrames::Sums sums = frames.sums(req.detectors, req.com_pixels.empty() ? nullptr : &req.com_pixels, fixed, positions, threads);
    if (!fixed) sums.totals.assign(r.positions, 0), sums.com_weight = sums.com_row = sums.com_col = sums.totals;
    r.totals = std::move(sums.totals), r.com_weight = std::move(sums.com_weight);
    r.com_row = std::move(sums.com_row), r.com_col = std::move(sums.com_col);
    r.images = std::move(sums.images);
    r.evaluated_as = std::move(sums.evaluated_as);
    r.placements.push_back(resident_placement(TM_OP_STEM_FRAME_SUMS, copy));
  }
  if (req.pattern) {
    frames.pattern(positions, r.pattern_sum, r.pattern_max, threads);
    r.placements.push_back(resident_placement(TM_OP_STEM_PATTERN_REDUCE, copy));
  }
  if (got.built_now) r.placements.insert(r.placements.begin(), build_placements.begin(), build_placements.end());
  // The build's provenance (its bad-pixel counts cover the whole acquisition) with this request's region.
  nlohmann::json provenance = copy.load_provenance;
  provenance["scan_region"] = {s.r0, s.r1, s.c0, s.c1};
  provenance["resident"] = copy.to_json();
  provenance["resident"]["built_now"] = got.built_now;
  provenance["resident"]["evicted"] = got.evicted;
  r.load_provenance = std::move(provenance);
  r.decoded_bytes = got.built_now ? frames.appended() * pixels * dtype_size(acq.dtype) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tmorph
