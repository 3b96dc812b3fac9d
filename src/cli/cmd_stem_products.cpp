// tensormorph stem bf|abf|adf|haadf|df|mask|com|dpc|idpc|fft|mean-dp PATH -o OUT.npy: 4D-STEM products,
// computed by the domain (src/stem/products/product_run.h) while streaming the acquisition or read from the prepared
// cache, written as .npy (the numbers) or .png
// (through the display kernels: transform, limits, colour map, colour bar) with a JSON report (the
// numbers' summary, the disk and detector used, the rotation found, display limits, provenance, placement).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli/declared_flags.h"
#include "cli/output.h"
#include "cli/product_output.h"
#include "cli/ranks.h"
#include "cli/stem_args.h"
#include "ops/placement_json.h"
#include "cli/progress_line.h"
#include "stem/products/product_kind.h"
#include "stem/products/product_cache.h"
#include "stem/products/product_run.h"
#include "stem/runs/request_params.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct ProductArgs {
  LoadArgs load;
  ProductKind kind = ProductKind::bf;
  std::string center, mask, of = "mean-dp", rect;
  // NaN: not given.
  double radius = NAN, inner = NAN, outer = NAN, inner_mrad = NAN, outer_mrad = NAN, semiangle_mrad = NAN, mrad_per_px = NAN,
         rotation_deg = NAN;
  bool transpose = false, max = false;
  ProductDisplayFlags display;                         // PNG output
  std::string cache_path;                              // prepared products (stem prepare)
  bool no_cache = false;

  DiskRequest disk() const { return disk_request(center, radius); }
  DetectorRequest detector(ProductKind k) const {
    return {k, mask, given(inner_mrad), given(outer_mrad), given(inner), given(outer), parse_rect(rect, "--rect")};
  }
  Override semiangle() const { return {given(semiangle_mrad), "--semiangle-mrad"}; }
  Override angle_per_pixel() const { return {given(mrad_per_px), "--detector-mrad-per-px"}; }
};

// The runtime (settings, plugins, cost model) made on first use: loading the backend plugins (a Vulkan
// driver) costs more than answering from the prepared-products cache, which needs none of it.
class LazyRuntime {
 public:
  explicit LazyRuntime(const ComputeFlags& flags) : flags_(flags) {}
  const Runtime& runtime() {
    if (!rt_) rt_ = command_runtime(&flags_);
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

// The PNG figure's title and the grid its axes measure: the scan (a product with a scan step), the detector
// (mean-dp), or another grid (an FFT).
ProductFigure product_figure(const ProductArgs& a, const Sourced* scan_step) {
  const std::string file = std::filesystem::path(a.load.path).filename().string();
  ProductFigure f{std::string(product_name(a.kind)) + " OF " + file, "", ProductFigure::Grid::other, scan_step};
  if (scan_step) f.grid = ProductFigure::Grid::scan;
  else if (a.kind == ProductKind::mean_dp) f.grid = ProductFigure::Grid::detector;
  // The colour bar's units (docs/stem.md "Products"): counts summed in the detector, mean or max counts per pixel,
  // centre-of-mass shifts in detector pixels; iDPC and FFT magnitudes have no physical unit here.
  if (is_virtual_image(a.kind)) f.units = "COUNTS";
  else if (a.kind == ProductKind::mean_dp) f.units = a.max ? "MAX COUNTS" : "MEAN COUNTS";
  else if (a.kind == ProductKind::com || a.kind == ProductKind::dpc) f.units = "SHIFT (PX)";
  else if (a.kind == ProductKind::idpc) f.units = "PX X SCAN STEPS";  // the shift integrated over the scan
  return f;
}

// OUT.npy holds the numbers exactly (descr: their numpy dtype); OUT.png an image of them; OUT.tif the numbers for
// image tools, with the scan step as the pixel size when the product lies on the scan grid (`scan_step`, else null).
template <class T>
void write_product(const ProductArgs& a, const std::string& descr, const std::vector<uint64_t>& shape,
                   const std::vector<T>& values, const Sourced* scan_step, nlohmann::json& report, LazyRuntime& lazy,
                   std::vector<Placement>& placements) {
  switch (output_format(a.load.out, kProductOutputs)) {
    case OutputFormat::png:
      return write_product_png(a.load.out, product_name(a.kind), shape, std::vector<double>(values.begin(), values.end()),
                               a.display, lazy.planner(), report, placements, product_figure(a, scan_step));
    case OutputFormat::tiff:
      report["tiff"] = write_product_tiff(a.load.out, product_name(a.kind), descr, shape, values.data(), scan_step);
      return;
    default: write_product_npy(a.load.out, descr, shape, values.data(), values.size() * sizeof(T));
  }
}

// stem prepare: both passes, stored under the acquisition's key; reports what was prepared.
void run_prepare(const ProductArgs& a) {
  if (serve_as_other_rank(a.load.compute)) return;  // under mpirun: ranks > 0 compute the bands rank 0 sends
  const auto rt = command_runtime(&a.load.compute);
  const Acquisition acq = open_acquisition(a.load.path);
  const Planner planner = rt->planner();
  const LoadRequest load = make_request(a.load, *rt);
  const nlohmann::json report = prepare_and_store(a.cache_path, acq, load, planner);
  if (a.load.json) {
    print_json(report);
    return;
  }
  const nlohmann::json& disk = report["disk"];
  print_rows({{"prepared", a.load.path},
              {"cache", report["database"].get<std::string>()},
              {"scan x detector", report["scan_shape"].dump() + " x " + report["frame_shape"].dump()},
              {"bright-field disk", "centre (" + fmt(disk["row"].get<double>()) + ", " + fmt(disk["col"].get<double>()) +
                                        "), radius " + fmt(disk["radius"].get<double>()) + " px"},
              {"products", "totals, bf, abf, adf, haadf, df, com (dpc, idpc), mean and max patterns"},
              {"time", fmt(report["seconds"].get<double>()) + " s"}},
             0);
  print_placements(placements_from_json(report["placement"]));
}

// The table's detector row: "annulus 0 to 7.92 px (0 to 19.8 mrad), 193 pixels, evaluated as direct"; a user mask's
// file, a rectangle's rows and columns; the JSON itself for a shape this face does not know (--json has all of it).
// A radius as the report gives it: a number, or a word (core/json_number.h writes infinity as "inf").
std::string radius_text(const nlohmann::json& v) {
  if (v.is_number()) return fmt(v.get<double>());
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string detector_text(const nlohmann::json& d) try {
  const std::string kind = d.value("kind", "");
  std::string text;
  if (kind == "annulus" && d.contains("inner_px") && d.contains("outer_px")) {
    text = "annulus " + radius_text(d["inner_px"]) + " to " + radius_text(d["outer_px"]) + " px";
    if (d.contains("inner_mrad") && d.contains("outer_mrad"))
      text += " (" + radius_text(d["inner_mrad"]) + " to " + radius_text(d["outer_mrad"]) + " mrad)";
  } else if (kind == "user mask" && d.contains("file")) {
    text = "user mask " + d["file"].get<std::string>();
  } else if (kind == "rectangle" && d.contains("rows") && d.contains("cols")) {
    text = "rectangle rows [" + std::to_string(d["rows"][0].get<uint64_t>()) + ", " + std::to_string(d["rows"][1].get<uint64_t>()) +
           "), cols [" + std::to_string(d["cols"][0].get<uint64_t>()) + ", " + std::to_string(d["cols"][1].get<uint64_t>()) + ")";
  } else {
    return d.dump();
  }
  if (d.contains("pixels") && d["pixels"].is_number_unsigned()) text += ", " + std::to_string(d["pixels"].get<uint64_t>()) + " pixels";
  if (d.contains("evaluated_as") && d["evaluated_as"].is_string()) text += ", evaluated as " + d["evaluated_as"].get<std::string>();
  return text;
} catch (const nlohmann::json::exception&) {
  return d.dump();  // a shape this face does not expect: the report as it is, never an internal error
}

// The table's summary row: "min 19175, max 19975, mean 19577.3" (a field: "u: min …; v: min …"), "no values" when null.
std::string summary_text(const nlohmann::json& s) try {
  const auto one = [](const nlohmann::json& m) {
    if (m.is_null()) return std::string("no values");
    if (!m.contains("min") || !m.contains("max") || !m.contains("mean")) return m.dump();
    return "min " + radius_text(m["min"]) + ", max " + radius_text(m["max"]) + ", mean " + radius_text(m["mean"]);
  };
  if (s.is_object() && s.contains("u") && s.contains("v")) return "u: " + one(s["u"]) + "; v: " + one(s["v"]);
  return one(s);
} catch (const nlohmann::json::exception&) {
  return s.dump();
}

void run_product(const ProductArgs& a) {
  if (serve_as_other_rank(a.load.compute)) return;  // under mpirun: ranks > 0 compute the bands rank 0 sends
  LazyRuntime lazy(a.load.compute);
  const Acquisition acq = open_acquisition(a.load.path);
  ProductSpec spec;
  spec.kind = a.kind;
  spec.load = make_request(a.load);  // the frames' shape: enough for the cache key
  spec.of = product_kind_from_name(a.of);  // fft transforms another product: --of names it
  if (a.kind == ProductKind::fft && (!spec.of || !is_fft_source(*spec.of)))
    throw Error(ErrorKind::InvalidArgument, "--of " + a.of + ": expected mean-dp, bf, abf, adf, haadf, df or mask");
  spec.max_pattern = a.max;
  spec.disk = a.disk();
  spec.detector = a.detector(product_source(spec));
  spec.semiangle_mrad = a.semiangle();
  spec.angle_per_pixel = a.angle_per_pixel();
  spec.rotation = {given(a.rotation_deg), a.transpose};
  check_product_request(spec, Face::Cli);
  const DetectorRequest& d = spec.detector;
  if (product_source(spec) == ProductKind::mask && d.mask_file.empty() && !d.inner_px && !d.outer_px && !d.inner_mrad && !d.outer_mrad &&
      !d.rect)
    throw Error(ErrorKind::InvalidArgument,
                "stem mask: give --inner/--outer (pixels), --inner-mrad/--outer-mrad, --mask FILE, or --rect R0,C0,R1,C1");
  if (d.rect && product_source(spec) != ProductKind::mask)
    throw Error(ErrorKind::InvalidArgument, std::string("--rect: only stem mask (or fft --of mask) takes a rectangle, not ") +
                                                product_name(product_source(spec)));
  nlohmann::json cache_lookup = nlohmann::json::object();  // {"cache": …} when the cache was asked
  const std::optional<PreparedProducts> cached =
      !a.no_cache && product_served_by_prepared(spec) ? lookup_prepared(a.cache_path, acq, spec.load, cache_lookup) : std::nullopt;
  if (!cached) {  // computing: threads, memory budget and the planner come from the runtime
    spec.load.threads = lazy.runtime().threads;
    spec.load.memory_budget = lazy.runtime().memory_budget;
    spec.load.progress = terminal_frames_progress("decoding", a.load.json);
  }
  ProductOutput product = compute_product(acq, spec, cached, [&]() -> const Planner& { return lazy.planner(); });
  nlohmann::json report = std::move(product.report);
  report["product"] = product_name(a.kind);
  report["file"] = a.load.out;
  report.update(cache_lookup);
  std::vector<Placement> placements = std::move(product.placements);
  // A TIFF of a scan-grid product states its pixel size, and a PNG's axes are in nm: the file's (or unknown) scan
  // step per output position.
  std::optional<Sourced> step;
  const OutputFormat format = output_format(a.load.out, kProductOutputs);
  if ((format == OutputFormat::tiff || format == OutputFormat::png) && (is_virtual_image(a.kind) || is_com_field(a.kind)))
    step = scan_step_A(acq, spec.load, Override{std::nullopt, "--scan-step-A"});
  std::visit([&](const auto& values) {
    write_product(a, product.npy_descr, product.shape, values, step ? &*step : nullptr, report, lazy, placements);
  }, product.values);
  report["placement"] = placements_json(placements);
  std::ofstream side(a.load.out + ".json", std::ios::trunc);
  side << json_text(report) << "\n";
  if (a.load.json) {
    print_json(report);
    refuse_if_values_changed(acq, a.load.out);
    return;
  }
  std::vector<std::pair<std::string, std::string>> rows = {{"product", product_name(a.kind)}, {"wrote", a.load.out + " " + report["shape"].dump() + " and " + a.load.out + ".json"}};
  if (report.contains("disk"))
    rows.push_back({"bright-field disk", "centre (" + fmt(report["disk"]["row"].get<double>()) + ", " + fmt(report["disk"]["col"].get<double>()) +
                                             "), radius " + fmt(report["disk"]["radius"].get<double>()) + " px (" +
                                             report["disk"]["source"].get<std::string>() + ")"});
  if (report.contains("detector")) rows.push_back({"detector", detector_text(report["detector"])});
  if (report.contains("rotation"))
    rows.push_back({"rotation", fmt(report["rotation"]["angle_deg"].get<double>()) + " deg" +
                                    (report["rotation"]["transpose"].get<bool>() ? ", transposed" : "") + " (" +
                                    report["rotation"]["source"].get<std::string>() + ")"});
  rows.push_back({"summary", summary_text(report["summary"])});
  if (report.contains("provenance") && report["provenance"].contains("frames_on_device")) {
    const nlohmann::json& f = report["provenance"]["frames_on_device"];
    if (f.value("resident", false))
      rows.push_back({"frames", "decoded into device memory on " + f["where"].get<std::string>() + ", read there (" +
                                    std::to_string(f["batches_decoded_there"].get<uint64_t>()) + " batches)"});
  }
  rows.push_back({"time", fmt(report["seconds"].get<double>()) + " s"});
  if (report.contains("acquisition_problems"))
    for (const auto& p : report["acquisition_problems"]["problems"]) rows.push_back({"acquisition problem", p.get<std::string>()});
  print_rows(rows, 0);
  print_placements(placements);
  refuse_if_values_changed(acq, a.load.out);
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
      {"mask", "virtual image through --inner/--outer (pixels), --inner-mrad/--outer-mrad, --mask FILE.npy|FILE.png, or --rect R0,C0,R1,C1"},
      {"com", "centre of mass (μ_r, μ_c) in detector pixels, mean-subtracted: float64 [2, R, C]"},
      {"dpc", "centre of mass rotated by the angle (and transpose) that minimises the mean squared curl, or a given one"},
      {"idpc", "integrated DPC: the phase from the rotated field (FFT integration): float64 [R, C]"},
      {"fft", "fftshift(log1p |FFT2|) of the mean pattern (--of mean-dp) or of a virtual image (--of bf|abf|adf|haadf|df|mask)"},
      {"mean-dp", "mean diffraction pattern (uint64 sum / N) as float64, or the max pattern with --max (uint32)"},
  };
  for (const Spec& spec : specs) {
    auto a = std::make_shared<ProductArgs>();
    a->kind = parse_product_kind(spec.name);
    CLI::App* cmd = stem->add_subcommand(spec.name, spec.help);
    add_load_flags(cmd, a->load, true);
    require_output_format(cmd->add_option("-o,--out", a->load.out,
                                          "output .npy (exact numbers), .png (an image) or .tif (numbers for image tools: "
                                          "the product's integer type or 32-bit float, the scan step as pixel size); a JSON "
                                          "report is written beside it as OUT.npy.json, OUT.png.json or OUT.tif.json (the "
                                          "output's name + .json)")->required(),
                          kProductOutputs);
    a->display.add_to(cmd);
    cmd->add_option("--center", a->center, "R,C: the disk centre in detector pixels, fractional allowed (default: detected)");
    cmd->add_option("--radius", a->radius, "the bright-field disk radius in pixels (default: detected)");
    cmd->add_option("--inner", a->inner, "inner radius in pixels (inclusive)");
    cmd->add_option("--outer", a->outer, "outer radius in pixels (inclusive)");
    cmd->add_option("--inner-mrad", a->inner_mrad, "inner radius in mrad (through the detector angle per pixel)");
    cmd->add_option("--outer-mrad", a->outer_mrad, "outer radius in mrad");
    cmd->add_option("--semiangle-mrad", a->semiangle_mrad, "probe convergence semi-angle (default: from the file)");
    cmd->add_option("--detector-mrad-per-px", a->mrad_per_px,
                    "detector angle per unbinned pixel (default: the file's, else semi-angle / disk radius)");
    cmd->add_option("--mask", a->mask, "a user mask of the (binned) detector: .npy or .png, nonzero = inside");
    cmd->add_option("--rect", a->rect, "mask: R0,C0,R1,C1, the detector pixels (k, l) with R0 <= k < R1 and C0 <= l < C1 "
                                       "(half-open; excludes --inner/--outer/--mask)");
    cmd->add_option("--rotation-deg", a->rotation_deg, "dpc/idpc: use this rotation instead of finding it");
    cmd->add_flag("--transpose", a->transpose, "dpc/idpc with --rotation-deg: swap the components before rotating");
    cmd->add_option("--of", a->of, "fft: mean-dp (default), bf, abf, adf, haadf, df or mask");
    cmd->add_flag("--max", a->max, "mean-dp: write the max pattern instead of the mean");
    cmd->add_option("--cache", a->cache_path, "prepared-products cache (default: the user cache; see stem prepare)");
    cmd->add_flag("--no-cache", a->no_cache, "compute even when the acquisition is prepared");
    validate_declared_flags(cmd, product_params(), {"--scan-bin", "--detector-bin"});
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
