#include "stem_py.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "compute_args.h"
#include "interrupt.h"
#include "stem/acquisition.h"
#include "json_to_python.h"
#include "result_py.h"
#include "ops/placement_json.h"
#include "stem/products/calibration_document.h"
#include "stem/inspect_document.h"
#include "stem/load.h"
#include "stem/products/product_cache.h"
#include "stem/products/product_run.h"
#include "stem/resident/resident_store.h"
#include "stem/runs/request_params.h"
#include "stem/runs/ssb_run.h"
#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

using Pair = std::optional<std::array<uint64_t, 2>>;
using RegionTuple = std::optional<std::array<uint64_t, 4>>;  // (r0, r1, c0, c1), half-open

std::optional<Box> box_of(const RegionTuple& r) {
  if (!r) return std::nullopt;
  return Box{(*r)[0], (*r)[1], (*r)[2], (*r)[3]};
}

// The frames a call reads (no runtime yet: what the declaration checks).
LoadRequest load_request(const Pair& scan_shape, const RegionTuple& scan_region, const RegionTuple& detector_region, const Pair& scan_bin,
                         const Pair& detector_bin, const std::string& dtype) {
  LoadRequest req;
  req.scan_shape = scan_shape;
  req.scan_region = box_of(scan_region), req.detector_region = box_of(detector_region);
  if (scan_bin) req.scan_bin = *scan_bin;
  if (detector_bin) req.detector_bin = *detector_bin;
  req.dtype = dtype;
  return req;
}

// The runtime's threads and memory budget, and the call's cancel flag, into `req`.
void bind_runtime(LoadRequest& req, const app::Runtime& rt, Interruptible& call) {
  req.threads = rt.threads, req.memory_budget = rt.memory_budget;
  req.cancel = call.cancel_flag();
  req.progress = call.frames_hook();
}

LoadRequest load_request(const Pair& scan_shape, const RegionTuple& scan_region, const RegionTuple& detector_region, const Pair& scan_bin,
                         const Pair& detector_bin, const std::string& dtype, const app::Runtime& rt, Interruptible& call) {
  LoadRequest req = load_request(scan_shape, scan_region, detector_region, scan_bin, detector_bin, dtype);
  bind_runtime(req, rt, call);
  return req;
}

// The loaded frames as a numpy array that owns them (no copy): shape [scan rows, scan cols, det rows, det cols].
py::array to_numpy(StemArray&& s) {
  auto* owner = new LargeBuffer(std::move(s.data));
  py::capsule free_owner(owner, [](void* p) { delete static_cast<LargeBuffer*>(p); });
  py::dtype dt;
  switch (s.dtype) {
    case DType::U8: dt = py::dtype::of<uint8_t>(); break;
    case DType::U16: dt = py::dtype::of<uint16_t>(); break;
    case DType::U32: dt = py::dtype::of<uint32_t>(); break;
    case DType::U64: dt = py::dtype::of<uint64_t>(); break;
    case DType::F32: dt = py::dtype::of<float>(); break;  // float frames (EMPAD), unbinned
    case DType::F64: dt = py::dtype::of<double>(); break;  // their float64 bins
    default: throw Error(ErrorKind::Internal, "stem.load: unexpected output dtype " + std::string(dtype_name(s.dtype)));
  }
  const std::vector<py::ssize_t> shape(s.shape.begin(), s.shape.end());
  return py::array(dt, shape, owner->get(), free_owner);
}

// A declared switch given as a Python value: True or False (numpy's bool too); anything else is refused with
// the declaration's message, as the server refuses max=abc.
bool switch_arg(const py::object& v, const OperationSchema& op, std::string_view name) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::hasattr(v, "dtype") && py::hasattr(v, "item") && py::str(v.attr("dtype").attr("kind")).cast<std::string>() == "b")
    return v.attr("item")().cast<bool>();
  refuse(op.at(name), Face::Python, py::str(v).cast<std::string>());
}

// The declaration of an operation as Python sees it: one dict per parameter.
py::list parameters_of(const std::string& op_name) {
  const OperationSchema* op = stem_operation(op_name);
  if (!op) throw Error(ErrorKind::InvalidArgument, "operation: no 4D-STEM operation '" + op_name + "'");
  static const char* const kinds[] = {"number", "count", "switch", "choice", "counts", "numbers", "text"};
  const auto name_or_none = [](std::string_view n) { return n.empty() ? py::object(py::none()) : py::object(py::str(std::string(n))); };
  py::list out;
  for (const ParamSpec& p : op->params) {
    py::dict d;
    d["name"] = name_or_none(p.python), d["http"] = name_or_none(p.http), d["cli"] = name_or_none(p.cli);
    d["kind"] = kinds[static_cast<int>(p.kind)];
    d["low"] = p.lo, d["high"] = p.hi, d["low_open"] = p.lo_open;
    d["unit"] = std::string(p.unit), d["form"] = std::string(p.form), d["count"] = p.count, d["help"] = std::string(p.help);
    d["expected"] = expectation(p);
    out.append(d);
  }
  return out;
}

template <class T>
py::array values_array(const std::vector<T>& values, const std::vector<uint64_t>& shape) {
  const std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array_t<T> out(dims);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

}  // namespace

void bind_stem(py::module_& m) {
  py::module_ stem = m.def_submodule("stem", "4D-STEM acquisitions (Dectris HDF5): inspect, load, SSB ptychography.");

  stem.def("parameters", &parameters_of, py::arg("operation"),
           "The declared parameters of a 4D-STEM operation (stem.product, stem.ssb, stem.movie, stem.frame, stem.block, "
           "stem.calibration): for each its Python keyword (name; None when Python does not take it), HTTP query "
           "name (http), CLI flag (cli), kind, range (low, high, low_open), unit, form, count, help and the accepted "
           "values in words (expected). The one declaration the CLI, the server and this module check requests against.");
  stem.def(
      "resident", [] { return to_python(ResidentStore::process().describe()); },
      "The acquisitions this process keeps resident (decoded once, compact, exact; docs/stem.md \"Resident "
      "acquisitions\"): {budget, resident_bytes, copies: [...], evictions: [...]}. The budget is the setting "
      "stem.resident_memory, else a quarter of RAM; it is applied by the first call that computes.");
  stem.def(
      "drop_resident",
      [](const std::optional<std::string>& path) -> size_t {
        if (!path) {
          const size_t n = ResidentStore::process().describe()["copies"].size();
          ResidentStore::process().drop_all();
          return n;
        }
        return ResidentStore::process().drop_acquisition(open_acquisition(*path).master);
      },
      py::arg("path") = py::none(),
      "Drops the resident copy of the acquisition at `path` (every copy when None); returns how many were dropped. "
      "The next product decodes the files again.");
  stem.def(
      "check_keywords",
      [](const std::string& op_name, const std::vector<std::string>& names) {
        const OperationSchema* op = stem_operation(op_name);
        if (!op) throw Error(ErrorKind::InvalidArgument, "operation: no 4D-STEM operation '" + op_name + "'");
        for (const auto& n : names)
          if (!op->find(Face::Python, n)) refuse_unknown(*op, Face::Python, n);
      },
      py::arg("operation"), py::arg("names"),
      "Raises InvalidArgument naming the first of `names` that the operation does not take as a keyword.");

  stem.def(
      "inspect",
      [](const std::string& path, const Pair& scan_shape) {
        nlohmann::json doc;
        {
          py::gil_scoped_release unlocked;
          doc = inspect_document(open_acquisition(path), scan_shape, "scan_shape");
        }
        return to_python(doc);
      },
      py::arg("path"), py::kw_only(), py::arg("scan_shape") = py::none(),
      "The document `tensormorph stem inspect PATH --json` prints: layout, readiness (frames present / expected), "
      "detector, dtype, bad pixels, beam metadata, scan shape. Decodes nothing. PATH: a master file, a data file "
      "or a folder with one master.");

  stem.def(
      "calibration",
      [](const std::string& path, const Pair& scan_shape, const Pair& scan_bin, const Pair& detector_bin,
         const std::optional<std::array<double, 2>>& center, const std::optional<double>& radius,
         const std::optional<double>& energy_ev, const std::optional<double>& semiangle_mrad,
         const std::optional<double>& scan_step_A, const std::optional<double>& detector_mrad_per_px,
         const py::object& threads, const py::object& memory_budget, const py::object& backend, const py::object& prefer,
         const py::object& never, const py::object& allow_approx, const py::object& progress) {
        const app::ComputeRequest compute = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        const CalibrationOverrides overrides{{energy_ev, "energy_ev"},
                                             {semiangle_mrad, "semiangle_mrad"},
                                             {scan_step_A, "scan_step_A"},
                                             {detector_mrad_per_px, "detector_mrad_per_px"}};
        DiskRequest disk;
        disk.center = center, disk.radius = radius, disk.radius_name = "radius";
        nlohmann::json doc;
        Interruptible call{progress};
        call.run([&] {
          const auto rt = make_runtime(compute);
          const Planner planner = rt->planner();
          std::vector<Placement> placements;
          const LoadRequest load = load_request(scan_shape, std::nullopt, std::nullopt, scan_bin, detector_bin, "auto", *rt, call);
          doc = calibration_document(open_acquisition(path), load, disk, overrides, planner, &placements);
          doc["placement"] = placements_json(placements);
        });
        return to_python(doc);
      },
      py::arg("path"), py::kw_only(), py::arg("scan_shape") = py::none(), py::arg("scan_bin") = py::none(),
      py::arg("detector_bin") = py::none(), py::arg("center") = py::none(), py::arg("radius") = py::none(),
      py::arg("energy_ev") = py::none(), py::arg("semiangle_mrad") = py::none(), py::arg("scan_step_A") = py::none(),
      py::arg("detector_mrad_per_px") = py::none(), py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
      py::arg("allow_approx") = py::none(),
      py::arg("progress") = py::none(),
      "The calibration every product and SSB would use: energy, wavelength_A, semiangle, scan_step, "
      "detector_angle_per_pixel (each {value, unit, source}, or {value: None, unit, missing: why}) and the "
      "bright-field disk they follow from (detected with one pattern pass unless center and radius are given). "
      "Overrides are in unbinned units, as the CLI's --kv/--semiangle-mrad/--scan-step-A/--detector-mrad-per-px.");

  stem.def(
      "load",
      [](const std::string& path, const Pair& scan_shape, const RegionTuple& scan_region, const RegionTuple& detector_region,
         const Pair& scan_bin, const Pair& detector_bin, const std::string& dtype, const py::object& threads,
         const py::object& memory_budget, const py::object& progress) {
        const app::ComputeRequest compute = compute_request(threads, memory_budget, py::none(), py::none(), py::none(), py::none());
        StemArray s;
        Interruptible call{progress};
        call.run([&] {
          const auto rt = make_runtime(compute);
          s = load_stem(open_acquisition(path),
                        load_request(scan_shape, scan_region, detector_region, scan_bin, detector_bin, dtype, *rt, call));
        });
        py::object provenance = to_python(s.provenance);
        return named_result(to_numpy(std::move(s)), provenance);
      },
      py::arg("path"), py::kw_only(), py::arg("scan_shape") = py::none(), py::arg("scan_region") = py::none(),
      py::arg("detector_region") = py::none(), py::arg("scan_bin") = py::none(), py::arg("detector_bin") = py::none(),
      py::arg("dtype") = "auto", py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      py::arg("progress") = py::none(),
      "Decodes (a region of) the acquisition, binned, into memory: (array [scan rows, scan cols, det rows, det cols] "
      "of uint8/16/32/64 — the array owns the decoded frames, no copy — and its provenance dict, as `stem export` "
      "writes it). Regions are (r0, r1, c0, c1), half-open; bins (rows, cols); bad pixels are zeroed. Raises "
      "PrecisionRefused when the output does not fit the memory budget (the message lists the fallbacks).");

  stem.def(
      "product",
      [](const std::string& path, const std::string& kind, const std::optional<std::string>& of, const py::object& max_pattern,
         const std::optional<double>& inner, const std::optional<double>& outer, const std::optional<double>& inner_mrad,
         const std::optional<double>& outer_mrad, const std::optional<std::string>& mask,
         const std::optional<std::array<double, 2>>& center, const std::optional<double>& radius,
         const std::optional<double>& rotation_deg, const py::object& transpose, const Pair& scan_shape, const RegionTuple& scan_region,
         const RegionTuple& detector_region, const Pair& scan_bin, const Pair& detector_bin, const py::object& threads,
         const py::object& memory_budget, const py::object& backend, const py::object& prefer, const py::object& never,
         const py::object& allow_approx, const std::optional<std::string>& cache, bool use_cache, const py::object& progress) {
        const app::ComputeRequest compute = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        ProductSpec spec;
        spec.kind = parse_product_kind(kind, "kind");
        if (of) spec.of = parse_product_kind(*of, "of");
        if (spec.kind == ProductKind::fft && spec.of && !is_fft_source(*spec.of))
          throw Error(ErrorKind::InvalidArgument, "of: expected mean-dp, bf, abf, adf, haadf, df or mask, have " + *of);
        spec.max_pattern = switch_arg(max_pattern, product_params(), "max_pattern");
        spec.disk.center = center, spec.disk.radius = radius, spec.disk.radius_name = "radius";
        spec.detector.kind = product_source(spec);
        spec.detector.inner_px = inner, spec.detector.outer_px = outer;
        spec.detector.inner_mrad = inner_mrad, spec.detector.outer_mrad = outer_mrad;
        if (mask) spec.detector.mask_file = *mask;
        const DetectorRequest& d = spec.detector;
        if (product_source(spec) == ProductKind::mask && d.mask_file.empty() && !d.inner_px && !d.outer_px && !d.inner_mrad &&
            !d.outer_mrad)
          throw Error(ErrorKind::InvalidArgument, "stem mask: give inner/outer (pixels), inner_mrad/outer_mrad, or mask=FILE");
        spec.rotation = {rotation_deg, switch_arg(transpose, product_params(), "transpose")};
        spec.load = load_request(scan_shape, scan_region, detector_region, scan_bin, detector_bin, "auto");
        check_product_request(spec, Face::Python);
        ProductOutput out;
        nlohmann::json cache_lookup = nlohmann::json::object();  // {"cache": …} when the cache was asked
        Interruptible call{progress};
        call.run([&] {
          const auto rt = make_runtime(compute);
          const Planner planner = rt->planner();
          const Acquisition acq = open_acquisition(path);
          bind_runtime(spec.load, *rt, call);
          const std::optional<PreparedProducts> cached =
              use_cache && product_served_by_prepared(spec) ? lookup_prepared(cache.value_or(""), acq, spec.load, cache_lookup)
                                                            : std::nullopt;
          out = compute_product(acq, spec, cached, [&]() -> const Planner& { return planner; });
        });
        nlohmann::json report = std::move(out.report);
        report["product"] = product_name(spec.kind);
        report.update(cache_lookup);
        report["placement"] = placements_json(out.placements);
        py::array values = std::visit([&](const auto& v) { return values_array(v, out.shape); }, out.values);
        return named_result(values, to_python(report));
      },
      py::arg("path"), py::arg("kind"), py::kw_only(), py::arg("of") = py::none(), py::arg("max_pattern") = false,
      py::arg("inner") = py::none(), py::arg("outer") = py::none(), py::arg("inner_mrad") = py::none(),
      py::arg("outer_mrad") = py::none(), py::arg("mask") = py::none(), py::arg("center") = py::none(),
      py::arg("radius") = py::none(), py::arg("rotation_deg") = py::none(), py::arg("transpose") = false,
      py::arg("scan_shape") = py::none(), py::arg("scan_region") = py::none(), py::arg("detector_region") = py::none(),
      py::arg("scan_bin") = py::none(), py::arg("detector_bin") = py::none(), py::arg("threads") = py::none(),
      py::arg("memory_budget") = py::none(), py::arg("backend") = py::none(), py::arg("prefer") = py::none(),
      py::arg("never") = py::none(), py::arg("allow_approx") = py::none(), py::arg("cache") = py::none(),
      py::arg("use_cache") = true,
      py::arg("progress") = py::none(),
      "A 4D-STEM product, as `tensormorph stem KIND PATH --json` computes it: (values, report). kind: bf, abf, adf, "
      "haadf, df (virtual images, uint64 sums), mask (inner/outer in pixels, inner_mrad/outer_mrad, or mask=FILE), com "
      "and dpc (float64 [2, rows, cols]), idpc, mean-dp (max_pattern=True: the max pattern, uint32) or fft (of= "
      "another product, default mean-dp). The disk is detected unless center/radius are given; the DPC rotation "
      "is found unless rotation_deg is given. Answered from the prepared-products cache (prepare(); cache= its "
      "database, default the user cache) when it holds the acquisition and the request is one it serves, as on the "
      "CLI; use_cache=False computes. report['cache'] says whether it hit.");

  stem.def(
      "prepare",
      [](const std::string& path, const std::optional<std::string>& cache, const Pair& scan_shape, const RegionTuple& scan_region,
         const RegionTuple& detector_region, const Pair& scan_bin, const Pair& detector_bin, const py::object& threads,
         const py::object& memory_budget, const py::object& backend, const py::object& prefer, const py::object& never,
         const py::object& allow_approx, const py::object& progress) {
        const app::ComputeRequest compute = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        nlohmann::json report;
        Interruptible call{progress};
        call.run([&] {
          const auto rt = make_runtime(compute);
          const LoadRequest load = load_request(scan_shape, scan_region, detector_region, scan_bin, detector_bin, "auto", *rt, call);
          report = prepare_and_store(cache.value_or(""), open_acquisition(path), load, rt->planner());
        });
        return to_python(report);
      },
      py::arg("path"), py::kw_only(), py::arg("cache") = py::none(), py::arg("scan_shape") = py::none(),
      py::arg("scan_region") = py::none(), py::arg("detector_region") = py::none(), py::arg("scan_bin") = py::none(),
      py::arg("detector_bin") = py::none(), py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
      py::arg("allow_approx") = py::none(),
      py::arg("progress") = py::none(),
      "`tensormorph stem prepare PATH --json`: the pattern pass (disk) and one frame-sums pass for BF, ABF, ADF, HAADF, "
      "DF and the centre of mass, stored in the product cache (cache=, default the user cache) so that product() "
      "answers those from it. Returns the report (database, key, disk, detectors, seconds, placement).");

  stem.def(
      "ssb",
      [](const std::string& path, double C10, double C12, double phi12, bool fit, const py::object& scan_rotation_deg,
         const std::string& search, unsigned trials, unsigned estimate_trials, uint64_t seed, uint64_t fit_crop,
         const std::optional<std::array<double, 2>>& center, const std::optional<double>& radius, const RegionTuple& scan_region,
         const Pair& scan_bin, const Pair& detector_bin, const py::object& threads, const py::object& memory_budget,
         const py::object& backend, const py::object& prefer, const py::object& never, const py::object& allow_approx, const py::object& progress) {
        const app::ComputeRequest compute = compute_request(threads, memory_budget, backend, prefer, never, allow_approx);
        if (search != "estimate" && search != "wide")
          throw Error(ErrorKind::InvalidArgument, "search: expected 'estimate' or 'wide', have '" + search + "'");
        if (trials == 0 || estimate_trials == 0) throw Error(ErrorKind::InvalidArgument, "trials and estimate_trials must be at least 1");
        SsbRunRequest request;
        request.given.C10_A = C10, request.given.C12_A = C12, request.given.phi12_deg = phi12;
        if (fit) {
          SsbFitOptions o;
          o.search = search == "wide" ? SsbSearch::Wide : SsbSearch::Estimate;
          o.tpe.trials = trials, o.tpe.seed = seed, o.estimate_trials = estimate_trials;
          request.fit = o;
        }
        if (!scan_rotation_deg.is_none()) request.scan_rotation_deg = scan_rotation_deg.cast<double>();
        request.scan_rotation_source = "scan_rotation_deg";
        request.fit_crop = fit_crop;
        request.load = load_request(std::nullopt, scan_region, std::nullopt, scan_bin, detector_bin, "auto");
        check_ssb_request(request, Face::Python);
        request.setup.disk.center = center, request.setup.disk.radius = radius, request.setup.disk.radius_name = "radius";
        const bool may_bin = std::find(compute.allow_approx.begin(), compute.allow_approx.end(), kSsbBinDetectorStep) !=
                             compute.allow_approx.end();
        SsbRun run;
        Interruptible call{progress};
        call.run([&] {
          const auto rt = make_runtime(compute);
          const Planner planner = rt->planner();
          const Acquisition acq = open_acquisition(path);
          bind_runtime(request.load, *rt, call);
          if (request.fit) request.fit->progress = call.fit_hook();
          run = run_ssb_with_consent(acq, request, planner, may_bin);
        });
        nlohmann::json report = to_json(run);
        report["product"] = "ssb";
        report["placement"] = placements_json(run.placements);
        py::array_t<double> phase({static_cast<py::ssize_t>(run.result.rows), static_cast<py::ssize_t>(run.result.cols)});
        std::copy(run.result.phase.begin(), run.result.phase.end(), phase.mutable_data());
        return named_result(phase, to_python(report));
      },
      py::arg("path"), py::kw_only(), py::arg("C10") = 0.0, py::arg("C12") = 0.0, py::arg("phi12") = 0.0, py::arg("fit") = false,
      py::arg("scan_rotation_deg") = py::none(), py::arg("search") = "estimate", py::arg("trials") = 200,
      py::arg("estimate_trials") = 40, py::arg("seed") = 0, py::arg("fit_crop") = kSsbFitCrop, py::arg("center") = py::none(),
      py::arg("radius") = py::none(), py::arg("scan_region") = py::none(), py::arg("scan_bin") = py::none(),
      py::arg("detector_bin") = py::none(), py::arg("threads") = py::none(), py::arg("memory_budget") = py::none(),
      py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
      py::arg("allow_approx") = py::none(),
      py::arg("progress") = py::none(),
      "Single-sideband ptychography, as `tensormorph stem ssb PATH --json`: (phase [rows, cols] float64 radians, "
      "report dict). C10, C12 in angstrom, phi12 in degrees (given aberrations, a preview), or fit=True: the parallax "
      "estimate, TPE around it and Nelder-Mead, the branch by the phase's skewness (search='wide' for the 200-trial "
      "search over the whole range). The scan rotation is found from DPC unless given. The report carries the "
      "calibration with sources, the fit's stages and the placement.");
}

}  // namespace tmorph::python
