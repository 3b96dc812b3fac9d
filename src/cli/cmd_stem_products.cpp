// tensormorph stem bf|abf|adf|haadf|df|mask|com|dpc|idpc|fft|mean-dp PATH -o OUT.npy: 4D-STEM products,
// computed while streaming the acquisition (src/stem/products.h), written as .npy (the numbers) or .png
// (through the display kernels: transform, limits, colour map, colour bar) with a JSON report (the
// numbers' summary, the disk and detector used, the rotation found, display limits, provenance, placement).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "cli/product_output.h"
#include "cli/stem_args.h"
#include "ops/placement_json.h"
#include "stem/dpc.h"
#include "stem/product_cache.h"
#include "stem/products.h"
#include "stem/virtual_detector.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct ProductArgs {
  LoadArgs load;
  std::string product, center, mask, of = "mean-dp";
  double radius = NAN, inner = -1, outer = -1, inner_mrad = -1, outer_mrad = -1, semiangle_mrad = 0, rotation_deg = NAN;
  bool transpose = false, max = false;
  ProductDisplayFlags display;                         // PNG output
  std::string cache_path;                              // prepared products (stem prepare)
  bool no_cache = false;
};

// The runtime (settings, plugins, cost model) made on first use: loading the backend plugins (a Vulkan
// driver) costs more than answering from the prepared-products cache, which needs none of it.
class LazyRuntime {
 public:
  explicit LazyRuntime(const ComputeFlags& flags) : flags_(flags) {}
  const Runtime& runtime() {
    if (!rt_) rt_ = make_runtime(&flags_);
    return *rt_;
  }
  const Planner& planner() {
    if (!planner_) planner_.emplace(runtime().planner());
    return *planner_;
  }

 private:
  const ComputeFlags& flags_;
  std::unique_ptr<Runtime> rt_;
  std::optional<Planner> planner_;
};

// Products the prepared cache answers: presets around the detected disk, the centre of mass and what
// follows from it, the patterns; anything with a given disk or a custom detector is computed.
bool served_by_cache(const ProductArgs& a) {
  if (a.no_cache || !a.center.empty() || !std::isnan(a.radius) || a.inner >= 0 || a.outer >= 0 || a.inner_mrad >= 0 ||
      a.outer_mrad >= 0 || !a.mask.empty())
    return false;
  const std::string p = a.product == "fft" ? a.of : a.product;
  return p == "bf" || p == "abf" || p == "adf" || p == "haadf" || p == "df" || p == "com" || p == "dpc" || p == "idpc" ||
         p == "mean-dp";
}

// The prepared products of this acquisition and request, when the cache holds them. A cache that cannot
// be opened is reported and ignored (the product is computed).
std::optional<PreparedProducts> cached_products(const ProductArgs& a, const Acquisition& acq, const LoadRequest& load,
                                                nlohmann::json& report) {
  const std::string path = a.cache_path.empty() ? default_product_cache_path() : a.cache_path;
  try {
    if (a.cache_path.empty() && !std::filesystem::exists(path)) {
      report["cache"] = {{"hit", false}, {"database", path}};
      return std::nullopt;
    }
    ProductCache cache(path);
    auto p = cache.load(product_cache_key(acq, load));
    report["cache"] = {{"hit", p.has_value()}, {"database", path}};
    if (p) report["cache"]["prepare_seconds"] = p->prepare_seconds;
    return p;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::BadInput) throw;
    report["cache"] = {{"hit", false}, {"database", path}, {"warning", e.what()}};
    return std::nullopt;
  }
}

// OUT.npy holds the numbers exactly (descr: their numpy dtype); OUT.png an image of them.
template <class T>
void write_product(const ProductArgs& a, const std::string& descr, const std::vector<uint64_t>& shape,
                   const std::vector<T>& values, nlohmann::json& report, LazyRuntime& lazy,
                   std::vector<Placement>& placements) {
  if (is_png(a.load.out))
    return write_product_png(a.load.out, a.product, shape, std::vector<double>(values.begin(), values.end()), a.display,
                             lazy.planner(), report, placements);
  write_product_npy(a.load.out, descr, shape, values.data(), values.size() * sizeof(T));
}

template <class T>
nlohmann::json summary(const std::vector<T>& v) {
  if (v.empty()) return nullptr;
  double lo = static_cast<double>(v[0]), hi = lo, sum = 0;
  for (T x : v) lo = std::min(lo, static_cast<double>(x)), hi = std::max(hi, static_cast<double>(x)), sum += static_cast<double>(x);
  return {{"min", lo}, {"max", hi}, {"mean", sum / static_cast<double>(v.size())}};
}

// The bright-field disk: given (--center and --radius) or detected from the mean pattern (one extra pass).
BrightFieldDisk resolve_disk(const ProductArgs& a, const Acquisition& acq, const ProductRequest& base, const Planner& planner,
                             nlohmann::json* report, std::vector<Placement>* placements) {
  BrightFieldDisk disk;
  const auto center = parse_pair(a.center, "--center");
  if (!std::isnan(a.radius) && !(a.radius > 0))
    throw Error(ErrorKind::InvalidArgument, "--radius " + std::to_string(a.radius) + ": the bright-field radius must be > 0 pixels");
  if (center && a.radius > 0) {
    disk.row = static_cast<double>((*center)[0]), disk.col = static_cast<double>((*center)[1]), disk.radius = a.radius;
    (*report)["disk"] = {{"row", disk.row}, {"col", disk.col}, {"radius", disk.radius}, {"source", "given"}};
    return disk;
  }
  ProductRequest pattern = base;
  pattern.frame_sums = false, pattern.pattern = true;
  pattern.detectors.clear();
  const ProductResult r = compute_products(acq, pattern, planner);
  placements->insert(placements->end(), r.placements.begin(), r.placements.end());
  disk = detect_bright_field_disk(mean_pattern(r), r.frame_shape[0], r.frame_shape[1]);
  if (center) disk.row = static_cast<double>((*center)[0]), disk.col = static_cast<double>((*center)[1]);
  const bool radius_given = !std::isnan(a.radius);
  if (radius_given) disk.radius = a.radius;
  (*report)["disk"] = {{"row", disk.row}, {"col", disk.col}, {"radius", disk.radius}, {"area", disk.area},
                       {"threshold", disk.threshold}, {"source", center || radius_given ? "detected, partly given" : "detected"}};
  return disk;
}

// The detector of a virtual-image product: preset radii, --inner/--outer in pixels, or in mrad.
std::vector<uint32_t> resolve_detector(const ProductArgs& a, const Acquisition& acq, const BrightFieldDisk& disk,
                                       const std::array<uint64_t, 2>& frame, nlohmann::json* report) {
  if (a.product == "mask" && !a.mask.empty()) {
    auto pixels = mask_pixels_from_file(a.mask, frame[0], frame[1]);
    (*report)["detector"] = {{"kind", "user mask"}, {"file", a.mask}, {"pixels", pixels.size()}};
    return pixels;
  }
  double inner = 0, outer = 0;
  std::string units = "pixels";
  if (a.inner_mrad >= 0 || a.outer_mrad >= 0) {
    const double semi = a.semiangle_mrad > 0 ? a.semiangle_mrad : acq.convergence_semi_angle_mrad.value_or(0);
    if (semi <= 0)
      throw Error(ErrorKind::InvalidArgument, "--inner-mrad/--outer-mrad need the convergence semi-angle: the file has none; give --semiangle-mrad");
    const double mrad_per_px = semi / disk.radius;
    inner = std::max(0.0, a.inner_mrad) / mrad_per_px;
    outer = a.outer_mrad < 0 ? std::numeric_limits<double>::infinity() : a.outer_mrad / mrad_per_px;
    units = "mrad";
    (*report)["mrad_per_pixel"] = mrad_per_px;
  } else if (a.inner >= 0 || a.outer >= 0) {
    inner = std::max(0.0, a.inner);
    outer = a.outer < 0 ? std::numeric_limits<double>::infinity() : a.outer;
    if (a.outer == 0 || (a.outer > 0 && a.outer < inner))
      throw Error(ErrorKind::InvalidArgument, "--outer must be > 0 and >= --inner");
  } else if (auto preset = preset_radii(a.product, disk.radius)) {
    inner = preset->first, outer = preset->second;
  } else {
    throw Error(ErrorKind::InvalidArgument, "stem mask: give --inner/--outer (pixels), --inner-mrad/--outer-mrad, or --mask FILE");
  }
  auto pixels = annulus_pixels(frame[0], frame[1], disk.row, disk.col, inner, outer);
  (*report)["detector"] = {{"kind", "annulus"}, {"inner_px", inner}, {"outer_px", std::isinf(outer) ? nlohmann::json("inf") : nlohmann::json(outer)},
                           {"given_in", units}, {"pixels", pixels.size()}};
  return pixels;
}

// stem prepare: both passes, stored under the acquisition's key; reports what was prepared.
void run_prepare(const ProductArgs& a) {
  const auto rt = make_runtime(&a.load.compute);
  const Acquisition acq = open_acquisition(a.load.path);
  const Planner planner = rt->planner();
  const LoadRequest load = make_request(a.load, *rt);
  const PreparedProducts p = prepare_products(acq, load, planner);
  ProductCache cache(a.cache_path.empty() ? default_product_cache_path() : a.cache_path);
  cache.store(product_cache_key(acq, load), p);
  nlohmann::json report = {{"database", cache.path()},
                           {"key", nlohmann::json::parse(product_cache_key(acq, load))},
                           {"scan_shape", p.sums.scan_shape},
                           {"frame_shape", p.sums.frame_shape},
                           {"disk", {{"row", p.disk.row}, {"col", p.disk.col}, {"radius", p.disk.radius}}},
                           {"detectors", p.detectors},
                           {"seconds", p.prepare_seconds},
                           {"placement", placements_json(p.sums.placements)}};
  if (a.load.json) {
    std::cout << report.dump(2) << "\n";
    return;
  }
  print_rows({{"prepared", a.load.path},
              {"cache", cache.path()},
              {"scan x detector", nlohmann::json(p.sums.scan_shape).dump() + " x " + nlohmann::json(p.sums.frame_shape).dump()},
              {"bright-field disk", "centre (" + fmt(p.disk.row) + ", " + fmt(p.disk.col) + "), radius " + fmt(p.disk.radius) + " px"},
              {"products", "totals, bf, abf, adf, haadf, df, com (dpc, idpc), mean and max patterns"},
              {"time", fmt(p.prepare_seconds) + " s"}},
             0);
  print_placements(p.sums.placements);
}

void run_product(const ProductArgs& a) {
  LazyRuntime lazy(a.load.compute);
  const Acquisition acq = open_acquisition(a.load.path);
  ProductRequest req;
  req.load = make_request(a.load);  // the frames' shape: enough for the cache key
  nlohmann::json report = {{"product", a.product}, {"file", a.load.out}};
  const std::string p = a.product;
  const bool image = p == "bf" || p == "abf" || p == "adf" || p == "haadf" || p == "df" || p == "mask";
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<PreparedProducts> cached =
      served_by_cache(a) ? cached_products(a, acq, req.load, report) : std::nullopt;
  if (!cached) {  // computing: threads, memory budget and the planner come from the runtime
    req.load.threads = lazy.runtime().threads;
    req.load.memory_budget = lazy.runtime().memory_budget;
  }
  // A cache hit stands in for the pass: its arrays, its provenance, no placement (nothing ran now).
  const auto from_cache = [&]() {
    ProductResult r = cached->sums;
    r.placements.clear();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.decoded_bytes = 0;
    return r;
  };
  std::vector<Placement> placements;
  const auto done = [&](const ProductResult& r) {
    placements.insert(placements.end(), r.placements.begin(), r.placements.end());
    report["seconds"] = r.seconds;
    report["decoded_bytes"] = r.decoded_bytes;
    report["provenance"] = r.load_provenance;
  };

  if (p == "mean-dp" || (p == "fft" && a.of == "mean-dp")) {
    req.frame_sums = false, req.pattern = true;
    const ProductResult r = cached ? from_cache() : compute_products(acq, req, lazy.planner());
    done(r);
    const std::vector<uint64_t> shape = {r.frame_shape[0], r.frame_shape[1]};
    if (p == "fft") {
      const auto v = fft_view(mean_pattern(r), shape[0], shape[1]);
      write_product(a, "<f8", shape, v, report, lazy, placements), report["summary"] = summary(v);
    } else if (a.max) {
      write_product(a, "<u4", shape, r.pattern_max, report, lazy, placements), report["summary"] = summary(r.pattern_max);
    } else {
      const auto v = mean_pattern(r);
      write_product(a, "<f8", shape, v, report, lazy, placements), report["summary"] = summary(v);
      report["frames"] = r.positions;
    }
    report["shape"] = shape;
  } else if (image || p == "fft") {
    ProductArgs preset = a;
    if (p == "fft") preset.product = a.of;
    if (!preset_radii(preset.product, 1) && preset.product != "mask")
      throw Error(ErrorKind::InvalidArgument, "--of " + a.of + ": expected mean-dp, bf, abf, adf, haadf or df");
    ProductResult r;
    if (cached) {
      const size_t k = static_cast<size_t>(std::find(std::begin(kPreparedPresets), std::end(kPreparedPresets), preset.product) -
                                           std::begin(kPreparedPresets));
      const BrightFieldDisk& d = cached->disk;
      report["disk"] = {{"row", d.row}, {"col", d.col}, {"radius", d.radius}, {"area", d.area}, {"threshold", d.threshold},
                        {"source", "detected (prepared)"}};
      report["detector"] = cached->detectors.at(k);
      report["detector"]["kind"] = "annulus";
      report["detector"]["given_in"] = "pixels";
      r = from_cache();
      r.images = {cached->sums.images.at(k)};
      r.evaluated_as = {cached->sums.evaluated_as.at(k)};
    } else {
      const BrightFieldDisk disk = resolve_disk(a, acq, req, lazy.planner(), &report, &placements);
      const LoadPlan plan = plan_load(acq, req.load);
      const std::array<uint64_t, 2> frame = {plan.output_shape[2], plan.output_shape[3]};
      req.detectors.push_back(resolve_detector(preset, acq, disk, frame, &report));
      req.com = false;  // a virtual image needs only its detector's sums (and the total when it is dense)
      r = compute_products(acq, req, lazy.planner());
    }
    done(r);
    report["detector"]["evaluated_as"] = r.evaluated_as[0];
    const std::vector<uint64_t> shape = {r.scan_shape[0], r.scan_shape[1]};
    report["shape"] = shape;
    if (p == "fft") {
      const auto v = fft_view(std::vector<double>(r.images[0].begin(), r.images[0].end()), shape[0], shape[1]);
      write_product(a, "<f8", shape, v, report, lazy, placements), report["summary"] = summary(v);
    } else {
      write_product(a, "<u8", shape, r.images[0], report, lazy, placements), report["summary"] = summary(r.images[0]);
    }
  } else if (p == "com" || p == "dpc" || p == "idpc") {
    const ProductResult r = cached ? from_cache() : compute_products(acq, req, lazy.planner());
    done(r);
    const ScanField com = center_of_mass(r);
    ScanField field = com;
    if (p != "com") {
      DpcRotation rot;
      if (std::isnan(a.rotation_deg)) {
        rot = find_dpc_rotation(com);
        report["rotation"] = {{"source", "found (minimum mean squared curl)"}, {"curl2_other_transpose", rot.curl2_other}};
      } else {
        rot.angle = a.rotation_deg * M_PI / 180, rot.transpose = a.transpose;
        curl_div(rotate_field(com, rot.angle, rot.transpose), &rot.curl2, &rot.div2);
        report["rotation"] = {{"source", "given"}};
      }
      report["rotation"]["angle_deg"] = rot.angle * 180 / M_PI;
      report["rotation"]["angle_rad"] = rot.angle;
      report["rotation"]["transpose"] = rot.transpose;
      report["rotation"]["mean_curl2"] = rot.curl2;
      report["rotation"]["mean_div2"] = rot.div2;
      field = rotate_field(com, rot.angle, rot.transpose);
    }
    if (p == "idpc") {
      const auto phase = integrate_dpc(field);
      write_product(a, "<f8", {field.rows, field.cols}, phase, report, lazy, placements), report["summary"] = summary(phase);
      report["shape"] = {field.rows, field.cols};
    } else {
      std::vector<double> both(field.u);
      both.insert(both.end(), field.v.begin(), field.v.end());
      write_product(a, "<f8", {2, field.rows, field.cols}, both, report, lazy, placements);
      report["shape"] = {2, field.rows, field.cols};
      report["summary"] = {{"u", summary(field.u)}, {"v", summary(field.v)}};
    }
  }
  report["placement"] = placements_json(placements);
  std::ofstream side(a.load.out + ".json", std::ios::trunc);
  side << report.dump(2) << "\n";
  if (a.load.json) {
    std::cout << report.dump(2) << "\n";
    return;
  }
  std::vector<std::pair<std::string, std::string>> rows = {{"product", p}, {"wrote", a.load.out + " " + report["shape"].dump() + " and " + a.load.out + ".json"}};
  if (report.contains("disk"))
    rows.push_back({"bright-field disk", "centre (" + fmt(report["disk"]["row"].get<double>()) + ", " + fmt(report["disk"]["col"].get<double>()) +
                                             "), radius " + fmt(report["disk"]["radius"].get<double>()) + " px (" +
                                             report["disk"]["source"].get<std::string>() + ")"});
  if (report.contains("detector")) rows.push_back({"detector", report["detector"].dump()});
  if (report.contains("rotation"))
    rows.push_back({"rotation", fmt(report["rotation"]["angle_deg"].get<double>()) + " deg" +
                                    (report["rotation"]["transpose"].get<bool>() ? ", transposed" : "") + " (" +
                                    report["rotation"]["source"].get<std::string>() + ")"});
  rows.push_back({"values", report["summary"].dump()});
  rows.push_back({"time", fmt(report["seconds"].get<double>()) + " s"});
  print_rows(rows, 0);
  print_placements(placements);
}

}  // namespace

void add_stem_product_commands(CLI::App* stem) {
  struct Spec {
    const char* name;
    const char* help;
  };
  const Spec specs[] = {
      {"bf", "bright-field image: Σ I over [0, r] of the disk centre (uint64)"},
      {"abf", "annular bright field: [r/2, r]"},
      {"adf", "annular dark field: [r, 2r]"},
      {"haadf", "high-angle annular dark field: [2r, 4r]"},
      {"df", "dark field: [r, inf)"},
      {"mask", "virtual image through --inner/--outer (pixels), --inner-mrad/--outer-mrad, or --mask FILE.npy|FILE.png"},
      {"com", "centre of mass (μ_r, μ_c) in detector pixels, mean-subtracted: float64 [2, R, C]"},
      {"dpc", "centre of mass rotated by the angle (and transpose) that minimises the mean squared curl, or a given one"},
      {"idpc", "integrated DPC: the phase from the rotated field (FFT integration): float64 [R, C]"},
      {"fft", "fftshift(log1p |FFT2|) of the mean pattern (--of mean-dp) or of a virtual image (--of bf|abf|adf|haadf|df)"},
      {"mean-dp", "mean diffraction pattern (uint64 sum / N) as float64, or the max pattern with --max (uint32)"},
  };
  for (const Spec& spec : specs) {
    auto a = std::make_shared<ProductArgs>();
    a->product = spec.name;
    CLI::App* cmd = stem->add_subcommand(spec.name, spec.help);
    add_load_flags(cmd, a->load, true);
    cmd->add_option("-o,--out", a->load.out, "output .npy (exact numbers) or .png (an image); a JSON report is written "
                                             "beside it as OUT.json")->required();
    a->display.add_to(cmd);
    cmd->add_option("--center", a->center, "R,C: the disk centre in detector pixels (default: detected)");
    cmd->add_option("--radius", a->radius, "the bright-field disk radius in pixels (default: detected)");
    cmd->add_option("--inner", a->inner, "inner radius in pixels (inclusive)");
    cmd->add_option("--outer", a->outer, "outer radius in pixels (inclusive)");
    cmd->add_option("--inner-mrad", a->inner_mrad, "inner radius in mrad (needs the convergence semi-angle)");
    cmd->add_option("--outer-mrad", a->outer_mrad, "outer radius in mrad");
    cmd->add_option("--semiangle-mrad", a->semiangle_mrad, "probe convergence semi-angle (default: from the file)");
    cmd->add_option("--mask", a->mask, "a user mask of the (binned) detector: .npy or .png, nonzero = inside");
    cmd->add_option("--rotation-deg", a->rotation_deg, "dpc/idpc: use this rotation instead of finding it");
    cmd->add_flag("--transpose", a->transpose, "dpc/idpc with --rotation-deg: swap the components before rotating");
    cmd->add_option("--of", a->of, "fft: mean-dp (default), bf, abf, adf, haadf or df");
    cmd->add_flag("--max", a->max, "mean-dp: write the max pattern instead of the mean");
    cmd->add_option("--cache", a->cache_path, "prepared-products cache (default: the user cache; see stem prepare)");
    cmd->add_flag("--no-cache", a->no_cache, "compute even when the acquisition is prepared");
    cmd->callback([a] { run_product(*a); });
  }

  auto prep = std::make_shared<ProductArgs>();
  CLI::App* cmd = stem->add_subcommand("prepare", "compute the totals, BF/ABF/ADF/HAADF/DF images, centre of mass and "
                                                  "patterns once and keep them, so that those products answer in ms");
  add_load_flags(cmd, prep->load, true);
  cmd->add_option("--cache", prep->cache_path, "cache database (default: $XDG_CACHE_HOME/tensormorph/stem/products.sqlite)");
  cmd->callback([prep] { run_prepare(*prep); });
}

}  // namespace tmorph::cli
