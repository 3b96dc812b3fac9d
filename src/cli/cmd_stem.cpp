// tensormorph stem …: 4D-STEM acquisitions (Dectris HDF5).
//   demo      write a simulated acquisition (master + data files, bitshuffle+LZ4)
//   discover  list the *_master.h5 files below a folder, with their readiness
//   inspect   readiness, detector, dtype, codec, metadata and source identity, without decoding
//   load      decode (a region of) the acquisition into memory and report what it took
//   export    the same, written as .npy with a provenance sidecar (OUT.provenance.json)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/output_format.h"
#include "cli/compute_flags.h"
#include "cli/stem_args.h"
#include "core/npy.h"
#include "support/thread_pool.h"
#include "stem/acquisition.h"
#include "stem/inspect_document.h"
#include "stem/load.h"
#include "stem/demo/simulate.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

std::string human_rate(double bytes, double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GB/s", seconds > 0 ? bytes / seconds / 1e9 : 0.0);
  return text;
}

std::string human_mb(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

void print_inspect(const nlohmann::json& j) {
  const auto& r = j["readiness"];
  std::vector<std::pair<std::string, std::string>> rows = {
      {"acquisition", j["master"].get<std::string>()},
      {"layout", j["format"].get<std::string>() + ", " + j["layout"].get<std::string>()},
      {"readiness", r["status"].get<std::string>() + " (" + std::to_string(r["frames_present"].get<uint64_t>()) + " frames present" +
                        (r["frames_expected"].is_null() ? std::string(", no expected count in the metadata")
                                                        : " of " + std::to_string(r["frames_expected"].get<uint64_t>()) + " expected") +
                        ")"},
      {"detector", std::to_string(j["detector_shape"][0].get<uint64_t>()) + " x " + std::to_string(j["detector_shape"][1].get<uint64_t>()) +
                       " " + j["dtype"].get<std::string>()},
      {"scan", j["scan_shape"].is_null() ? j["scan_shape_problem"].get<std::string>()
                                         : std::to_string(j["scan_shape"][0].get<uint64_t>()) + " x " +
                                               std::to_string(j["scan_shape"][1].get<uint64_t>())},
      {"bad pixels", std::to_string(j["bad_pixels"].get<int64_t>()) +
                         (j["pixel_mask"].is_null() ? std::string(" (no pixel mask)") : " (" + j["pixel_mask"].get<std::string>() + ")")},
      {"source id", j["signature"].get<std::string>()}};
  if (!j["beam_energy_ev"].is_null()) rows.push_back({"beam energy", fmt(j["beam_energy_ev"].get<double>() / 1e3) + " keV"});
  if (!j["convergence_semi_angle_mrad"].is_null())
    rows.push_back({"convergence", fmt(j["convergence_semi_angle_mrad"].get<double>()) + " mrad"});
  if (!j["saturation_value"].is_null()) rows.push_back({"saturation", std::to_string(j["saturation_value"].get<uint64_t>())});
  std::set<std::string> codecs;
  for (const auto& f : r["data_files"])
    if (f.contains("codec")) codecs.insert(f["codec"].get<std::string>());
  std::string codec_text;
  for (const auto& c : codecs) codec_text += (codec_text.empty() ? "" : ", ") + c;
  rows.push_back({"storage", std::to_string(r["data_files"].size()) + " dataset(s), " + (codec_text.empty() ? "none readable" : codec_text)});
  print_rows(rows, 0);
  for (const auto& p : r["problems"]) std::cout << "problem: " << p.get<std::string>() << "\n";
}

nlohmann::json load_report(const StemArray& s) {
  return {{"shape", s.shape},
          {"dtype", dtype_name(s.dtype)},
          {"bytes", s.bytes},
          {"seconds", s.seconds},
          {"stored_bytes_read", s.stored_bytes_read},
          {"decoded_bytes", s.decoded_bytes},
          {"decoded_gb_per_s", s.seconds > 0 ? static_cast<double>(s.decoded_bytes) / s.seconds / 1e9 : 0.0},
          {"provenance", s.provenance}};
}

template <class T>
uint64_t sum_values(const uint8_t* bytes, uint64_t n) {
  const T* v = reinterpret_cast<const T*>(bytes);
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) total += v[i];
  return total;
}

// Float frames (EMPAD): the sum of all output values in float64, added in output order.
double total_value(const StemArray& s) {
  const uint64_t n = s.bytes / dtype_size(s.dtype);
  double total = 0.0;
  for (uint64_t i = 0; i < n; ++i)
    total += s.dtype == DType::F32 ? static_cast<double>(reinterpret_cast<const float*>(s.data.get())[i])
                                   : reinterpret_cast<const double*>(s.data.get())[i];
  return total;
}
bool float_output(const StemArray& s) { return s.dtype == DType::F32 || s.dtype == DType::F64; }

// Sum of all output values (a quick check for people; wraps modulo 2^64 beyond that).
uint64_t total_counts(const StemArray& s) {
  const uint64_t n = s.bytes / dtype_size(s.dtype);
  switch (s.dtype) {
    case DType::U8: return sum_values<uint8_t>(s.data.get(), n);
    case DType::U16: return sum_values<uint16_t>(s.data.get(), n);
    case DType::U32: return sum_values<uint32_t>(s.data.get(), n);
    default: return sum_values<uint64_t>(s.data.get(), n);
  }
}

void print_load(const StemArray& s, const std::string& verb) {
  const auto& p = s.provenance;
  print_rows({{"source", p["source"]["master"].get<std::string>() + " (" + p["source"]["signature"].get<std::string>() + ")"},
              {verb, fmt_shape({s.shape.begin(), s.shape.end()}) + " " + std::string(dtype_name(s.dtype)) +
                         (p["output"]["narrowed_from"].is_null() ? std::string() : " (narrowed from " + p["output"]["narrowed_from"].get<std::string>() + ", every value fits)")},
              {"scan region", p["scan_region"].dump() + ", bin " + p["scan_bin"].dump()},
              {"detector region", p["detector_region"].dump() + ", bin " + p["detector_bin"].dump()},
              {"bad pixels", p["bad_pixels"]["zeroed"].get<bool>()
                                 ? std::to_string(p["bad_pixels"]["pixel_mask_pixels"].get<uint64_t>()) + " masked pixels and " +
                                       std::to_string(p["bad_pixels"]["sentinel_values_zeroed"].get<uint64_t>()) + " sentinel values zeroed"
                                 : std::string("kept (--no-mask)")},
              {float_output(s) ? "total" : "total counts", float_output(s) ? fmt(total_value(s)) : std::to_string(total_counts(s))},
              {"decoder", p["decoder"].get<std::string>() + ", " + p["device"].get<std::string>()},
              {"time", fmt(s.seconds) + " s: " + human_rate(static_cast<double>(s.decoded_bytes), s.seconds) + " decoded, " +
                           human_rate(static_cast<double>(s.stored_bytes_read), s.seconds) + " stored bytes read"}},
             0);
}

}  // namespace

void add_stem_command(CLI::App& app) {
  CLI::App* stem = app.add_subcommand("stem", "4D-STEM acquisitions (Dectris HDF5): discover, inspect, load, export, demo data");
  stem->require_subcommand(1);

  // ---- demo
  struct DemoArgs {
    std::string out = "build/stem-demo", prefix = "demo", size = "small", scan, dtype = "uint16", layout = "external",
                encoder = "tensormorph";
    uint64_t detector = 0, files = 4, seed = 1, threads = 0, scan_step_px = 2;
    double dose = 20000, defocus_nm = 5, astigmatism_nm = 0, astigmatism_deg = 0, cs_um = 0, semiangle_mrad = 20, energy_kev = 300,
           scan_rotation_deg = 0;
    bool json = false;
  };
  auto demo = std::make_shared<DemoArgs>();
  CLI::App* d = stem->add_subcommand("demo", "write a simulated 4D-STEM acquisition in the Dectris layout");
  d->add_option("--out", demo->out, "folder to write (default build/stem-demo)");
  d->add_option("--prefix", demo->prefix, "file name prefix (<prefix>_master.h5)");
  d->add_option("--size", demo->size, "small (32x32 scan, 64x64 frames), medium (128x128, 96x96: 302 MB raw), large (192x192, 128x128: 1.2 GB raw) or full (512x512, 192x192: 19.3 GB raw)");
  d->add_option("--scan", demo->scan, "ROWS,COLS of the scan (overrides --size)");
  d->add_option("--detector", demo->detector, "K: frames are K x K pixels (overrides --size)");
  d->add_option("--dtype", demo->dtype, "uint8, uint16 (default) or uint32");
  d->add_option("--files", demo->files, "number of data files the frames are split over (default 4)");
  d->add_option("--layout", demo->layout, "external (master + data files, default) or inline (frames in the master)");
  d->add_option("--encoder", demo->encoder, "tensormorph (default), hdf5-filter (the installed bitshuffle plugin) or none");
  d->add_option("--dose", demo->dose, "electrons per frame (default 20000)");
  d->add_option("--defocus-nm", demo->defocus_nm, "probe defocus C10 in nm (default 5)");
  d->add_option("--C12-nm", demo->astigmatism_nm, "probe two-fold astigmatism C12 in nm (default 0)");
  d->add_option("--phi12-deg", demo->astigmatism_deg, "its azimuth in degrees, from +column towards +row (default 0)");
  d->add_option("--C30-um", demo->cs_um, "spherical aberration C30 in micrometres (default 0)");
  d->add_option("--semiangle-mrad", demo->semiangle_mrad, "probe convergence semi-angle (default 20)");
  d->add_option("--energy-kev", demo->energy_kev, "beam energy (default 300)");
  d->add_option("--seed", demo->seed, "noise and dead-pixel seed (default 1)");
  d->add_option("--scan-step-px", demo->scan_step_px,
                "scan step in the simulation's real-space pixels (default 2; the pixel is 1 / (K x detector frequency per "
                "pixel), 0.12 A for K = 96 at 300 kV and 20 mrad)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{64}));
  d->add_option("--scan-rotation-deg", demo->scan_rotation_deg,
                "turn the scan's axes by this angle against the detector's (DPC then finds -angle mod 180)");
  d->add_option("--threads", demo->threads, "threads (default: all cores)")->check(CLI::Range(uint64_t{1}, uint64_t{kMaxThreads}));
  d->add_flag("--json", demo->json, "machine-readable output");
  d->callback([demo] {
    StemSimulationParams p;
    if (demo->size == "small") p.scan_rows = p.scan_cols = 32, p.detector = 64;
    else if (demo->size == "full") p.scan_rows = p.scan_cols = 512, p.detector = 192;
    else if (demo->size == "medium") p.scan_rows = p.scan_cols = 128, p.detector = 96;
    else if (demo->size == "large") p.scan_rows = p.scan_cols = 192, p.detector = 128;
    else throw Error(ErrorKind::InvalidArgument, "--size " + demo->size + ": expected small, medium, large or full");
    if (auto s = parse_pair(demo->scan, "--scan")) p.scan_rows = (*s)[0], p.scan_cols = (*s)[1];
    if (demo->detector) p.detector = demo->detector;
    if (demo->dtype == "uint8") p.dtype = DType::U8;
    else if (demo->dtype == "uint16") p.dtype = DType::U16;
    else if (demo->dtype == "uint32") p.dtype = DType::U32;
    else throw Error(ErrorKind::InvalidArgument, "--dtype " + demo->dtype + ": expected uint8, uint16 or uint32");
    if (demo->layout != "external" && demo->layout != "inline")
      throw Error(ErrorKind::InvalidArgument, "--layout " + demo->layout + ": expected external or inline");
    if (demo->encoder != "tensormorph" && demo->encoder != "hdf5-filter" && demo->encoder != "none")
      throw Error(ErrorKind::InvalidArgument, "--encoder " + demo->encoder + ": expected tensormorph, hdf5-filter or none");
    p.dose = demo->dose;
    p.scan_rotation_deg = demo->scan_rotation_deg;
    p.defocus_nm = demo->defocus_nm;
    p.astigmatism_nm = demo->astigmatism_nm;
    p.astigmatism_deg = demo->astigmatism_deg;
    p.cs_um = demo->cs_um;
    p.semiangle_mrad = demo->semiangle_mrad;
    p.energy_ev = demo->energy_kev * 1e3;
    p.seed = demo->seed;
    p.scan_step_px = demo->scan_step_px;
    DectrisWriterOptions o;
    o.folder = demo->out;
    o.prefix = demo->prefix;
    o.inline_data = demo->layout == "inline";
    const uint64_t frames = p.scan_rows * p.scan_cols;
    o.frames_per_file = (frames + std::max<uint64_t>(demo->files, 1) - 1) / std::max<uint64_t>(demo->files, 1);
    o.encoder = demo->encoder;
    const unsigned threads = demo->threads ? static_cast<unsigned>(demo->threads) : default_thread_count();
    const std::string master = write_simulated_acquisition(p, o, threads);
    const uint64_t raw = frames * p.detector * p.detector * dtype_size(p.dtype);
    if (demo->json) {
      print_json(nlohmann::json{{"master", master}, {"scan_shape", {p.scan_rows, p.scan_cols}}, {"detector", p.detector},
                                  {"dtype", demo->dtype}, {"raw_bytes", raw}});
    } else {
      std::cout << "wrote " << master << ": " << p.scan_rows << "x" << p.scan_cols << " scan of " << p.detector << "x" << p.detector << " "
                << demo->dtype << " frames (" << human_mb(raw) << " raw)\n";
    }
  });

  // ---- discover
  auto discover_path = std::make_shared<std::string>();
  auto discover_json = std::make_shared<bool>(false);
  CLI::App* disc = stem->add_subcommand("discover", "list the acquisitions below a folder (Dectris *_master.h5 and every other format's files: docs/stem.md)");
  disc->add_option("FOLDER", *discover_path, "folder to search (recursively)")->required();
  disc->add_flag("--json", *discover_json, "machine-readable output");
  disc->callback([discover_path, discover_json] {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& m : discover_acquisitions(*discover_path)) {
      nlohmann::json e = {{"master", m}};
      try {
        const Acquisition acq = open_acquisition(m);
        e["format"] = acq.format;
        e["status"] = acq.complete() ? "complete" : "incomplete";
        e["frames_present"] = acq.frames_present;
        e["detector_shape"] = {acq.detector_rows, acq.detector_cols};
        e["dtype"] = dtype_name(acq.dtype);
      } catch (const Error& err) {
        e["status"] = "unreadable";
        e["problem"] = err.what();
      }
      list.push_back(e);
    }
    if (*discover_json) {
      print_json(list);
      return;
    }
    if (list.empty()) std::cout << "no acquisition below " << *discover_path << "\n";
    for (const auto& e : list)
      std::cout << e["master"].get<std::string>() << "  " << e["status"].get<std::string>()
                << (e.contains("frames_present") ? "  " + std::to_string(e["frames_present"].get<uint64_t>()) + " frames of " +
                                                       std::to_string(e["detector_shape"][0].get<uint64_t>()) + "x" +
                                                       std::to_string(e["detector_shape"][1].get<uint64_t>()) + " " +
                                                       e["dtype"].get<std::string>()
                                                 : "  " + e["problem"].get<std::string>())
                << "\n";
  });

  // ---- inspect
  struct InspectArgs {
    std::string path, scan_shape;
    bool json = false;
  };
  auto ins = std::make_shared<InspectArgs>();
  CLI::App* i = stem->add_subcommand("inspect", "readiness, detector, metadata and source identity of an acquisition (decodes nothing)");
  i->add_option("PATH", ins->path, "master file, data file or folder with one master")->required();
  add_dataset_flag(i, ins->path);
  i->add_option("--scan-shape", ins->scan_shape, "ROWS,COLS of the scan (needed when the file records none and the frame count is not a square)");
  i->add_flag("--json", ins->json, "machine-readable output");
  i->callback([ins] {
    const Acquisition acq = open_acquisition(ins->path);
    const nlohmann::json j = inspect_document(acq, parse_pair(ins->scan_shape, "--scan-shape"), "--scan-shape");
    if (ins->json) print_json(j);
    else print_inspect(j);
  });

  // ---- load
  auto load = std::make_shared<LoadArgs>();
  CLI::App* l = stem->add_subcommand("load", "decode an acquisition (or a region, binned) into memory and report it");
  add_load_flags(l, *load, false);
  l->callback([load] {
    const auto rt = command_runtime(&load->compute);
    const Acquisition acq = open_acquisition(load->path);
    const StemArray s = load_stem(acq, make_request(*load, *rt));
    if (load->json) {
      nlohmann::json j = load_report(s);
      if (float_output(s)) j["total"] = total_value(s);  // float frames are not counts
      else j["total_counts"] = total_counts(s);
      print_json(j);
    } else {
      print_load(s, "loaded");
    }
  });

  // ---- export
  auto exp = std::make_shared<LoadArgs>();
  CLI::App* e = stem->add_subcommand("export", "write (a region of) an acquisition as .npy, with OUT.provenance.json");
  add_load_flags(e, *exp, false);
  require_output_format(e->add_option("-o,--out", exp->out, "output .npy file")->required(), {OutputFormat::npy});
  e->callback([exp] {
    const auto rt = command_runtime(&exp->compute);
    const Acquisition acq = open_acquisition(exp->path);
    const StemArray s = load_stem(acq, make_request(*exp, *rt));
    std::vector<uint64_t> shape(s.shape.begin(), s.shape.end());
    if (!exp->frame.empty()) shape = {s.shape[2], s.shape[3]};  // one frame: a 2-D image
    bool widen = false;
    const std::string preamble = npy_preamble(npy_descr(s.dtype, &widen), shape);
    std::ofstream out(exp->out, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, exp->out + ": cannot create");
    out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
    out.write(reinterpret_cast<const char*>(s.data.get()), static_cast<std::streamsize>(s.bytes));
    out.close();
    if (!out) throw Error(ErrorKind::Io, exp->out + ": write failed");
    nlohmann::json report = load_report(s);
    report["file"] = exp->out;
    report["provenance"]["output"]["file"] = exp->out;
    std::ofstream side(exp->out + ".provenance.json", std::ios::trunc);
    side << json_text(s.provenance) << "\n";
    if (exp->json) print_json(report);
    else print_load(s, "exported"), std::cout << "wrote " << exp->out << " and " << exp->out << ".provenance.json\n";
  });

  add_stem_product_commands(stem);
  add_stem_ssb_command(stem);
  add_stem_movie_command(stem);
}

}  // namespace tmorph::cli
