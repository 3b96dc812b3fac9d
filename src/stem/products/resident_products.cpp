#include "stem/products/resident_products.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string_view>

#include "stem/products/virtual_detector.h"
#include "stem/resident/device_copy.h"
#include "stem/resident/resident_store.h"
#include "support/large_buffer.h"
#include "support/thread_pool.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kBuildBatchBytes = uint64_t{64} << 20;  // dense frames decoded per append (as the streamed passes)
constexpr uint64_t kFusedBatches = 4;  // later batches compacted frame by frame: this many times larger

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
  return "";
}

// What the first `frames` frames of the copy were decoded from: detector shape, dtype, the pixel mask applied, and
// every readable part holding any of them with its file's size and modification time. A copy is extended only when
// this is unchanged for the frames it holds (a data file rewritten, a mask changed, or a single file that grows in
// place: built again from the start).
std::string frames_identity(const Acquisition& acq, uint64_t frames) {
  namespace fs = std::filesystem;
  std::string id = std::to_string(acq.detector_rows) + "x" + std::to_string(acq.detector_cols) + " " + std::string(dtype_name(acq.dtype)) +
                   " mask " + std::to_string(acq.pixel_mask.size()) + ":" +
                   std::to_string(std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(acq.pixel_mask.data()),
                                                                                 acq.pixel_mask.size() * sizeof(uint32_t))));
  for (const DataPart& d : acq.parts) {
    if (!d.present || d.first_frame >= frames) continue;
    std::error_code e1, e2;
    const auto size = fs::file_size(d.file, e1);
    const auto mtime = fs::last_write_time(d.file, e2);
    id += "\n" + d.file + "|" + d.dataset + "|" + std::to_string(d.first_frame) + "+" + std::to_string(d.frames) + "|" +
          (e1 || e2 ? std::string("unreadable") : std::to_string(size) + "@" + std::to_string(mtime.time_since_epoch().count()));
  }
  return id;
}

// Orders `copy` radially about the bright-field disk of its mean pattern so far, unless it is ordered about that
// centre already. No disk (a flat pattern): left as it is (pixel order: annuli are then summed entry by entry).
void order_about_disk(CompactFrames& copy, unsigned threads) {
  std::vector<double> mean(copy.pattern_sum().size());
  for (size_t i = 0; i < mean.size(); ++i) mean[i] = static_cast<double>(copy.pattern_sum()[i]) / static_cast<double>(copy.appended());
  try {
    const BrightFieldDisk disk = detect_bright_field_disk(mean, copy.rows(), copy.cols());
    if (copy.radial_center() != std::array<double, 2>{disk.row, disk.col}) copy.order_radially(disk.row, disk.col, threads);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
  }
}

// One decode of the acquisition's first `ready_rows` scan rows (every row once it is complete) into a compact copy,
// ordered radially about the bright-field disk of its mean pattern (pixel order when no disk is found). When
// `previous` (a copy of the acquisition's former files) holds frames that are unchanged, the new copy extends it:
// only the rows after it are decoded, appended in its order. The decode is placed as a streamed pass places it.
ResidentStore::Built build_copy(const Acquisition& acq, const LoadPlan& like, const LoadRequest& request, const Planner& planner,
                                uint64_t budget, std::vector<Placement>* placements, const ResidentCopyInfo* previous,
                                uint64_t ready_rows) {
  LoadRequest whole;
  whole.scan_shape = like.scan_shape;
  if (ready_rows < like.scan_shape[0]) whole.scan_region = Box{0, ready_rows, 0, like.scan_shape[1]};
  whole.threads = request.threads;
  whole.cancel = request.cancel;
  whole.progress = request.progress;  // the build is the long part: its frames are what a progress line shows
  StemLoader loader(acq, whole);
  const LoadPlan& plan = loader.plan();
  const uint64_t scan_positions = like.scan_shape[0] * like.scan_shape[1];
  std::unique_ptr<CompactFrames> copy;
  uint64_t reused = 0;
  if (previous) {
    const CompactFrames& before = *previous->frames;
    if (before.positions() == scan_positions && before.rows() == plan.output_shape[2] && before.cols() == plan.output_shape[3] &&
        before.value_bytes() == dtype_size(plan.output_dtype) && before.appended() <= loader.positions() &&
        previous->frames_identity == frames_identity(acq, before.appended())) {
      copy = before.extended();
      reused = copy->appended();
    }
  }
  if (!copy) copy = std::make_unique<CompactFrames>(scan_positions, plan.output_shape[2], plan.output_shape[3]);
  if (reused < loader.positions())
    if (const auto decode_at = place_decode(acq, loader, planner)) placements->push_back(*decode_at);
  // The first batch is small (its disk orders the rest); the others larger when compacted frame by frame (no dense
  // buffer: fewer waits for the slowest thread), checked against the budget after each.
  const uint64_t first_batch = std::max<uint64_t>(1, kBuildBatchBytes / loader.position_bytes());
  uint64_t batch = first_batch;
  const unsigned parts = ThreadPool::shared(std::max(1u, request.threads)).size();  // the loader's threads
  LargeBuffer frames;  // dense frames, only when the loader cannot hand them over one at a time
  for (uint64_t first = reused; first < loader.positions(); first += batch) {
    if (first > reused && !frames.get()) batch = first_batch * kFusedBatches;
    const uint64_t n = std::min(batch, loader.positions() - first);
    // Each frame compacted as soon as it is decoded, while in cache (fill_each); else a batch filled, then appended.
    CompactFrames::Appender appender(*copy, n, plan.output_dtype, parts);
    if (loader.fill_each(first, n, [&](unsigned part, uint64_t b, uint64_t e) { appender.begin(part, b - first, e - first); },
                         [&](unsigned part, uint64_t, const uint8_t* frame) { appender.add(part, frame); })) {
      appender.finish();
    } else {
      if (!frames.get()) frames = LargeBuffer(std::min(first_batch, loader.positions() - reused) * loader.position_bytes());
      loader.fill(first, n, frames.get());
      copy->append(frames.get(), n, plan.output_dtype, request.threads);
    }
    // A fresh copy takes its radial order from the first batch's disk, so the later batches are ordered as they are
    // appended (in cache) rather than in a second pass over the whole copy; the end re-orders only if the disk of
    // the whole scan differs.
    if (first == 0 && reused == 0) order_about_disk(*copy, request.threads);
    if (copy->bytes() > budget)
      throw OverBudget("the compact copy outgrew the resident budget (" + std::to_string(budget) + " bytes) after " +
                       std::to_string(copy->appended()) + " of " + std::to_string(copy->positions()) + " positions");
  }
  if (reused == 0 && copy->appended() > 0) order_about_disk(*copy, request.threads);
  nlohmann::json provenance = loader.provenance();
  if (reused > 0) {  // the bad-pixel values zeroed in the frames reused count too
    nlohmann::json& zeroed = provenance["bad_pixels"]["sentinel_values_zeroed"];
    const nlohmann::json& before = previous->load_provenance["bad_pixels"]["sentinel_values_zeroed"];
    if (zeroed.is_number_unsigned() && before.is_number_unsigned()) zeroed = zeroed.get<uint64_t>() + before.get<uint64_t>();
  }
  ResidentStore::Built built;
  built.frames_identity = frames_identity(acq, copy->appended());
  built.frames = std::move(copy);
  built.load_provenance = std::move(provenance);
  built.positions_reused = reused;
  return built;
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
  // While the acquisition is being written, the copy holds the scan rows whose frames are all readable, and serves
  // regions inside them; the streamed path reads (or refuses) the others.
  const uint64_t ready_rows = std::min(plan.scan_shape[0], acq.frames_readable_prefix() / plan.scan_shape[1]);
  if (plan.scan_region.r1 > ready_rows) {
    *why = "the scan region reaches frames not yet written (" + std::to_string(ready_rows) + " of " +
           std::to_string(plan.scan_shape[0]) + " scan rows readable)";
    return std::nullopt;
  }
  const ResidentKey key{acq.master, acq.signature, plan.scan_shape[0], plan.scan_shape[1]};
  std::vector<Placement> build_placements;
  ResidentStore::Got got;
  try {
    got = store.get_or_build(key, [&](uint64_t budget, const ResidentCopyInfo* previous) {
      return build_copy(acq, plan, req.load, planner, budget, &build_placements, previous, ready_rows);
    });
  } catch (const OverBudget& e) {
    *why = e.what();
    return std::nullopt;
  } catch (const FrameNotCompactable& e) {  // the frames stream, exactly, and the provenance says why
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
  nlohmann::json device_copy_report;  // the device copy the sums read, when they ran on a device
  if (req.frame_sums) {
    // The streamed pass computes totals and centre-of-mass sums when asked, or when a dense detector needs the
    // total; the same fields are filled here (zeros otherwise), so the results match field for field.
    const bool dense = std::any_of(req.detectors.begin(), req.detectors.end(),
                                   [&](const auto& d) { return d.size() > pixels / 2 && d.size() < pixels; });
    const bool fixed = req.com || dense;
    const std::vector<uint32_t>* com_pixels = req.com_pixels.empty() ? nullptr : &req.com_pixels;
    // Placed like any op: the planner prices stem.compact_sums on every backend with its kernel, knowing where the
    // copy lives (the host, and the devices holding an image of it: no transfer there). A device reading host memory
    // (the CPU) computes from the host copy in place; another computes from its device copy, uploaded once.
    Placement at;
    try {
      at = planner.place(compact_sums_request(frames, copy.device_locations()));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Unavailable) throw;
      *why = std::string("the resident copy cannot be summed where the constraints allow: ") + e.what();
      return std::nullopt;
    }
    const DeviceInfo& device = at.backend_ref->devices.at(at.device_index);
    CompactFrames::Sums sums;
    if (device.host_link_bytes_per_s == 0 && at.backend_ref->origin == "static") {
      // The linked reference (the CPU) reads the host copy in place: CompactFrames::sums is its arithmetic.
      sums = frames.sums(req.detectors, com_pixels, fixed, positions, threads);
      if (at.reason == "cheapest" || at.reason == "sole_supporter") at.reason = "resident_data";
    } else if (device.host_link_bytes_per_s == 0) {
      // A plugin whose device reads host memory: its kernel over a host image of the copy, made for this request.
      const CompactImage image = compact_image(frames);
      sums = compact_sums(at, frames, nullptr, &image, req.detectors, com_pixels, fixed, positions, threads);
    } else {
      std::string refused;
      bool uploaded = false;
      nlohmann::json device_evictions = nlohmann::json::array();
      const std::shared_ptr<const DeviceCopy> on_device = store.device_copy(copy, at, &refused, &uploaded, &device_evictions);
      if (!on_device && !planner.constraints().strict_backend.empty()) {  // --backend: streamed there instead
        *why = refused;
        return std::nullopt;
      }
      if (!on_device) {  // computed from the host copy, and the report says why not on the device
        Placement host = resident_placement(TM_OP_STEM_COMPACT_SUMS, copy);
        host.rejected = at.rejected;
        host.rejected.push_back({at.backend, at.device, "over_memory_budget", refused});
        at = std::move(host);
        sums = frames.sums(req.detectors, com_pixels, fixed, positions, threads);
      } else {
        try {
          sums = compact_sums(at, frames, on_device.get(), nullptr, req.detectors, com_pixels, fixed, positions, threads);
        } catch (const Error& e) {  // the backend cannot run this call (TM_ERR_UNSUPPORTED): streamed instead, saying why
          if (e.kind() != ErrorKind::Unavailable) throw;
          *why = e.what();
          return std::nullopt;
        }
        at.bytes_transferred = uploaded ? on_device->bytes : 0;
        device_copy_report = on_device->to_json();
        device_copy_report["built_now"] = uploaded;
        device_copy_report["evicted"] = std::move(device_evictions);  // other copies' device copies freed for it
      }
    }
    if (!fixed) sums.totals.assign(r.positions, 0), sums.com_weight = sums.com_row = sums.com_col = sums.totals;
    r.totals = std::move(sums.totals), r.com_weight = std::move(sums.com_weight);
    r.com_row = std::move(sums.com_row), r.com_col = std::move(sums.com_col);
    r.images = std::move(sums.images);
    r.evaluated_as = std::move(sums.evaluated_as);
    r.placements.push_back(std::move(at));
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
  if (!device_copy_report.is_null()) provenance["resident"]["device_copy"] = device_copy_report;
  r.load_provenance = std::move(provenance);
  r.decoded_bytes = got.built_now ? copy.positions_appended * pixels * dtype_size(acq.dtype) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tmorph
