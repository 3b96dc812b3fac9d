#include "stem/products/products.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "compute/resident_copy.h"
#include "ops/kernel_call.h"
#include "ops/split_run.h"
#include "stem/products/resident_products.h"
#include "stem/products/virtual_detector.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

// Device memory for a batch of decoded frames when decoding and every product run on one device: the frames are
// then decoded there and read there, never crossing to the host. Null (with *why) otherwise.
std::unique_ptr<ResidentCopy> frames_on_device(const StemLoader& loader, const ProductRequest& req, const Placement& sums_at,
                                               const Placement& pattern_at, uint64_t bytes, std::string* why) {
  const Placement* decode_at = loader.device_decode();
  if (!decode_at) {
    *why = "decoding is not placed on a device, or the frames are cropped, binned or converted on the host";
    return nullptr;
  }
  if (req.frame_sums && !sums_at.split.empty()) {
    *why = "the frame sums are split over several backends, which read host frames";
    return nullptr;
  }
  const auto same = [&](const Placement& p) { return p.backend_ref == decode_at->backend_ref && p.device_index == decode_at->device_index; };
  if ((req.frame_sums && !same(sums_at)) || (req.pattern && !same(pattern_at))) {
    *why = "a product is placed on another backend or device than decoding";
    return nullptr;
  }
  // The device's own limit (half its memory) bounds the batch; the host budget does not apply to device memory.
  return ResidentCopy::allocate(*decode_at, bytes, 0, why);
}

// The placement of a frame op. Float frames have kernels on the CPU only (docs/backends.md): under --backend NAME
// whose NAME lacks them, the op goes where the planner places it with NAME preferred, and the placement's
// `rejected` says why NAME was passed over (dtype_unsupported), as decode placements do.
Placement place_frames(const Planner& planner, const OpRequest& op) {
  const Constraints& c = planner.constraints();
  const bool floating = op.dtype == DType::F32 || op.dtype == DType::F64;
  try {
    return planner.place(op);
  } catch (const Error&) {
    if (!floating || c.strict_backend.empty()) throw;
  }
  Constraints relaxed = c;
  relaxed.prefer.insert(relaxed.prefer.begin(), c.strict_backend);
  relaxed.strict_backend.clear();
  return planner.with(relaxed).place(op);
}

nlohmann::json device_frames_report(const ResidentCopy* frames, const std::string& why, uint64_t resident_batches,
                                    uint64_t host_batches) {
  if (!frames) return {{"resident", false}, {"why", why}};
  return {{"resident", true},
          {"where", frames->location()},
          {"batch_bytes", frames->bytes()},
          {"batches_decoded_there", resident_batches},
          {"batches_decoded_here", host_batches},
          {"read_there_by", {"stem.frame_sums", "stem.pattern_reduce"}}};
}

}  // namespace

ProductResult compute_products_here(const Acquisition& acq, const ProductRequest& req, const Planner& planner) {
  std::string not_resident_why;
  if (std::optional<ProductResult> resident = products_from_resident(acq, req, planner, &not_resident_why)) return std::move(*resident);
  const auto t0 = std::chrono::steady_clock::now();
  StemLoader loader(acq, req.load);
  const LoadPlan& plan = loader.plan();
  const DType dtype = plan.output_dtype;
  if (dtype == DType::U64)
    throw Error(ErrorKind::InvalidArgument, "products: binned frames would need 64-bit pixels; use smaller bins");
  ProductResult r;
  r.floating = dtype == DType::F32 || dtype == DType::F64;
  r.scan_shape = {plan.output_shape[0], plan.output_shape[1]};
  r.frame_shape = {plan.output_shape[2], plan.output_shape[3]};
  r.positions = loader.positions();
  const uint64_t pixels = r.frame_shape[0] * r.frame_shape[1];
  if (pixels >= (uint64_t{1} << 32)) throw Error(ErrorKind::InvalidArgument, "products: frames of 2^32 pixels or more");
  // Exactness of the uint64 sums (op contract): pixels × largest index × largest value < 2^64. Integer frames only
  // (u8, u16, u32: u64 is refused above); float frames are summed in float64 and have no such bound (and the shift
  // by 8 × 8 bits of an f64 would be undefined).
  if (!r.floating) {
    const unsigned __int128 bound = static_cast<unsigned __int128>(pixels) * std::max(r.frame_shape[0], r.frame_shape[1]) *
                                    ((uint64_t{1} << (8 * dtype_size(dtype))) - 1);
    if (bound >> 64) throw Error(ErrorKind::InvalidArgument, "products: frame sums could exceed 2^64; bin the detector");
  }

  // Pixel lists: each detector directly or as its complement (then image = total − sum), and the CoM list.
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> list_pixels;
  for (const auto& d : req.detectors) {
    for (uint32_t p : d)
      if (p >= pixels) throw Error(ErrorKind::InvalidArgument, "products: a detector pixel lies outside the frame");
    // A detector of the whole frame is read directly: its complement would be an empty list, and the backends
    // refuse lists with no pixels at all.
    const bool dense = !r.floating && d.size() > pixels / 2 && d.size() < pixels;
    const std::vector<uint32_t> list = dense ? complement_pixels(d, pixels) : d;
    r.evaluated_as.push_back(dense ? "total - complement" : "direct");
    list_pixels.insert(list_pixels.end(), list.begin(), list.end());
    offsets.push_back(list_pixels.size());
  }
  uint32_t com_list = TM_STEM_ALL_PIXELS;
  if (!req.com_pixels.empty()) {
    com_list = static_cast<uint32_t>(req.detectors.size());
    list_pixels.insert(list_pixels.end(), req.com_pixels.begin(), req.com_pixels.end());
    offsets.push_back(list_pixels.size());
  }
  const uint32_t list_count = static_cast<uint32_t>(offsets.size() - 1);
  const bool need_totals = req.com || std::find(r.evaluated_as.begin(), r.evaluated_as.end(), "total - complement") != r.evaluated_as.end();
  const tm_stem_frame_sums_params_v1 sums_params{pixels, static_cast<uint32_t>(r.frame_shape[1]), list_count, offsets.data(),
                                                 list_pixels.data(), com_list, need_totals ? 0u : TM_STEM_LISTS_ONLY};
  const tm_stem_pattern_params_v1 pattern_params{pixels};

  // One placement per op for the whole stream.
  OpRequest op;
  op.dtype = dtype;
  op.elements = r.positions * pixels;
  op.bytes = op.elements * dtype_size(dtype);
  op.memory_budget_bytes = req.load.memory_budget;
  Placement sums_at, pattern_at;
  const size_t sums_report = r.placements.size();  // where the frame sums' placement is reported (final after the run)
  if (req.frame_sums) op.op = TM_OP_STEM_FRAME_SUMS, sums_at = place_frames(planner, op), r.placements.push_back(sums_at);
  if (req.pattern) op.op = TM_OP_STEM_PATTERN_REDUCE, pattern_at = place_frames(planner, op), r.placements.push_back(pattern_at);
  if (const auto decode_at = place_decode(acq, loader, planner)) r.placements.push_back(*decode_at);
  const uint64_t batch = std::max<uint64_t>(1, req.batch_bytes / loader.position_bytes());
  const uint64_t batch_positions = std::min(batch, r.positions);
  std::string not_resident;
  const std::unique_ptr<ResidentCopy> device_frames =
      frames_on_device(loader, req, sums_at, pattern_at, batch_positions * loader.position_bytes(), &not_resident);

  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + list_count;
  std::vector<uint64_t> sums;
  if (req.frame_sums) sums.resize(r.positions * row_values);
  if (req.pattern && !r.floating) r.pattern_sum.assign(pixels, 0), r.pattern_max.assign(pixels, 0);
  // Integer frames: uint64 sums then uint32 maxima, zeroed; float frames: float64 sums (+0.0) then float64
  // maxima (-Inf), as the op's contract asks.
  std::vector<uint8_t> pattern_out(pixels * (r.floating ? 2 * sizeof(double) : sizeof(uint64_t) + sizeof(uint32_t)), 0);
  if (r.floating) {
    const double lowest = -std::numeric_limits<double>::infinity();
    for (uint64_t i = 0; i < pixels; ++i) std::memcpy(pattern_out.data() + (pixels + i) * sizeof(double), &lowest, sizeof lowest);
  }
  LargeBuffer frames;  // host frames, for batches not decoded on the device
  SplitRun sums_split;  // the frame sums' shares, when the planner split them
  const unsigned threads = std::max(1u, req.load.threads);
  uint64_t resident_batches = 0, host_batches = 0;
  for (uint64_t first = 0; first < r.positions; first += batch) {
    const uint64_t n = std::min(batch, r.positions - first);
    const bool resident = device_frames && loader.fill_device(first, n, *device_frames);
    if (!resident) {
      if (!frames.get()) frames = LargeBuffer(batch_positions * loader.position_bytes());
      loader.fill(first, n, frames.get());
    }
    ++(resident ? resident_batches : host_batches);
    const DeviceOperands on{device_frames.get(), 0, nullptr, 0};
    const auto run = [&](const Placement& at, tm_op op, const KernelArgs& args) {
      if (resident) run_placed_kernel_on_device(at, op, args, on);
      else run_placed_kernel(at, op, args);
    };
    const void* input = resident ? nullptr : frames.get();
    if (req.frame_sums && !sums_at.split.empty()) {
      // Split (docs/backends.md): each share sums its run of the batch's positions into their own rows, so the rows
      // are what one backend writes. Device frames are never used with a split (frames_on_device).
      const size_t width = dtype_size(dtype);
      sums_split.call(sums_at.split, n, [&](size_t i, uint64_t u0, uint64_t u1, uint64_t* bytes) -> std::string {
        try {
          run_placed_kernel(sums_at.split[i].placement, TM_OP_STEM_FRAME_SUMS,
                            {dtype, frames.get() + u0 * pixels * width, (u1 - u0) * pixels, &sums_params, sizeof sums_params,
                             sums.data() + (first + u0) * row_values, (u1 - u0) * row_values * sizeof(uint64_t), threads});
        } catch (const Error& e) {
          return e.what();
        }
        *bytes = (u1 - u0) * pixels * width;
        return {};
      }, "stem.frame_sums");
    } else if (req.frame_sums) {
      run(sums_at, TM_OP_STEM_FRAME_SUMS,
          {dtype, input, n * pixels, &sums_params, sizeof sums_params, sums.data() + first * row_values,
           n * row_values * sizeof(uint64_t), threads});
    }
    if (req.pattern)
      run(pattern_at, TM_OP_STEM_PATTERN_REDUCE,
          {dtype, input, n * pixels, &pattern_params, sizeof pattern_params, pattern_out.data(), pattern_out.size(), threads});
  }
  if (req.pattern && r.floating) {
    r.pattern_sum_f.resize(pixels), r.pattern_max_f.resize(pixels);
    std::memcpy(r.pattern_sum_f.data(), pattern_out.data(), pixels * sizeof(double));
    std::memcpy(r.pattern_max_f.data(), pattern_out.data() + pixels * sizeof(double), pixels * sizeof(double));
  } else if (req.pattern) {
    std::memcpy(r.pattern_sum.data(), pattern_out.data(), pixels * sizeof(uint64_t));
    std::memcpy(r.pattern_max.data(), pattern_out.data() + pixels * sizeof(uint64_t), pixels * sizeof(uint32_t));
  }
  if (req.frame_sums && r.floating) {  // the op wrote float64 values in the uint64 slots
    const auto value = [&](uint64_t p, uint64_t k) {
      double v;
      std::memcpy(&v, sums.data() + p * row_values + k, sizeof v);
      return v;
    };
    r.totals_f.resize(r.positions), r.com_weight_f.resize(r.positions), r.com_row_f.resize(r.positions), r.com_col_f.resize(r.positions);
    r.images_f.assign(req.detectors.size(), std::vector<double>(r.positions));
    for (uint64_t p = 0; p < r.positions; ++p) {
      r.totals_f[p] = value(p, 0), r.com_weight_f[p] = value(p, 1), r.com_row_f[p] = value(p, 2), r.com_col_f[p] = value(p, 3);
      for (size_t d = 0; d < req.detectors.size(); ++d) r.images_f[d][p] = value(p, TM_STEM_FRAME_SUMS_FIXED + d);
    }
  } else if (req.frame_sums) {
    r.totals.resize(r.positions), r.com_weight.resize(r.positions), r.com_row.resize(r.positions), r.com_col.resize(r.positions);
    r.images.assign(req.detectors.size(), std::vector<uint64_t>(r.positions));
    for (uint64_t p = 0; p < r.positions; ++p) {
      const uint64_t* row = sums.data() + p * row_values;
      r.totals[p] = row[0], r.com_weight[p] = row[1], r.com_row[p] = row[2], r.com_col[p] = row[3];
      for (size_t d = 0; d < req.detectors.size(); ++d) {
        const uint64_t s = row[TM_STEM_FRAME_SUMS_FIXED + d];
        r.images[d][p] = r.evaluated_as[d] == "direct" ? s : row[0] - s;
      }
    }
  }
  if (req.frame_sums && !sums_at.split.empty()) r.placements[sums_report] = sums_at;  // with what each share summed
  if (device_frames && host_batches == 0)  // what crossed the link: the chunks up, the sums back; no frames
    for (Placement& p : r.placements)
      p.bytes_transferred = p.op == op_name(TM_OP_DECODE_BITSHUFFLE_LZ4) ? loader.stored_bytes_read() : 0;
  r.load_provenance = loader.provenance();
  r.load_provenance["resident"] = {{"used", false}, {"why", not_resident_why}};
  r.load_provenance["frames_on_device"] = device_frames_report(device_frames.get(), not_resident, resident_batches, host_batches);
  r.decoded_bytes = loader.decoded_bytes();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<double> mean_pattern(const ProductResult& r) {
  if (r.floating) {
    std::vector<double> out(r.pattern_sum_f.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = r.pattern_sum_f[i] / static_cast<double>(r.positions);
    return out;
  }
  std::vector<double> out(r.pattern_sum.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(r.pattern_sum[i]) / static_cast<double>(r.positions);
  return out;
}

}  // namespace tmorph
