#include "cli/stem_args.h"

#include <cmath>
#include <memory>

#include "cli/number_lists.h"
#include "cli/progress_line.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

std::optional<Box> parse_box(const std::string& text, const std::string& flag) {
  if (text.empty()) return std::nullopt;
  const auto v = parse_list(text, 4, flag);
  return Box{v[0], v[1], v[2], v[3]};
}

std::array<uint64_t, 2> parse_bin(const std::string& text, const std::string& flag) {
  if (text.empty()) return {1, 1};
  const auto v = text.find(',') == std::string::npos ? std::vector<uint64_t>{parse_list(text, 1, flag)[0], parse_list(text, 1, flag)[0]}
                                                     : parse_list(text, 2, flag);
  return {v[0], v[1]};
}

std::optional<DetectorRect> parse_rect(const std::string& text, const std::string& flag) {
  if (text.empty()) return std::nullopt;
  const auto v = parse_list(text, 4, flag);
  return DetectorRect{v[0], v[1], v[2], v[3]};
}

std::optional<std::array<uint64_t, 2>> parse_pair(const std::string& text, const std::string& flag) {
  if (text.empty()) return std::nullopt;
  const auto v = parse_list(text, 2, flag);
  return std::array<uint64_t, 2>{v[0], v[1]};
}

std::optional<std::array<double, 2>> parse_point(const std::string& text, const std::string& flag) {
  if (text.empty()) return std::nullopt;
  const auto [a, b] = parse_number_pair(text, flag, "R,C");
  return std::array<double, 2>{a, b};
}

DiskRequest disk_request(const std::string& center, double radius) {
  DiskRequest disk{parse_point(center, "--center"), given(radius)};
  disk.radius_name = "--radius";  // the domain checks it (resolve_bright_field_disk) and names it so
  return disk;
}

std::optional<double> given(double flag_value) { return std::isnan(flag_value) ? std::nullopt : std::optional<double>(flag_value); }

void add_dataset_flag(CLI::App* cmd, std::string& path) {
  auto dataset = std::make_shared<std::string>();
  cmd->add_option("--dataset", *dataset,
                  "/path/in/file: read the frames from this HDF5 dataset (the same as PATH:/path/in/file)")
      ->check([](const std::string& d) { return d.empty() || d[0] != '/' ? std::string("must start with '/'") : std::string(); });
  // After parsing, before the command runs: PATH and --dataset become the one spelling the openers read.
  cmd->parse_complete_callback([dataset, &path] {
    if (dataset->empty()) return;
    if (path.find(":/") != std::string::npos)
      throw Error(ErrorKind::InvalidArgument, "--dataset " + *dataset + ": PATH already names a dataset (" + path + ")");
    path += ":" + *dataset;
  });
}

void add_load_flags(CLI::App* cmd, LoadArgs& a, bool for_products) {
  cmd->add_option("PATH", a.path, "master file, data file or folder with one master")->required();
  add_dataset_flag(cmd, a.path);
  cmd->add_option("--scan-shape", a.scan_shape, "ROWS,COLS of the scan (needed when the file records none and the frame count is not a square)");
  cmd->add_option("--scan-region", a.scan_region, "R0,R1,C0,C1: half-open scan rows and columns to read (default: all)");
  cmd->add_option("--detector-region", a.detector_region, "R0,R1,C0,C1: half-open detector rows and columns to keep");
  cmd->add_option("--scan-bin", a.scan_bin, "N or R,C: sum N x N (R x C) scan positions per output position");
  cmd->add_option("--detector-bin", a.detector_bin, "N or R,C: sum N x N (R x C) detector pixels per output pixel");
  cmd->add_flag("--no-mask", a.no_mask, "keep bad pixels (pixel_mask > 0) and sentinel values instead of zeroing them");
  cmd->add_flag("--json", a.json, "machine-readable output");
  if (for_products) {
    a.compute.add_to(cmd);
    cmd->add_option("--resident-memory", a.compute.resident_memory,
                    "keep the acquisition resident for this command's passes, decoded once, within this many bytes "
                    "(e.g. 2G; default: stem.resident_memory or 0, off)");
    return;
  }
  cmd->add_option("--frame", a.frame, "R,C: only the frame at scan position (R, C)");
  cmd->add_option("--dtype", a.dtype, "auto (wide enough for every sum), or uint8/16/32/64 (narrowing only when every value fits); float frames "
                                     "(EMPAD): auto (float32 unbinned, float64 bins) or float64");
  cmd->add_option("--threads", a.compute.threads, "decode threads (default: compute.threads or all cores)")->check(CLI::Range(1u, kMaxThreads));
  cmd->add_option("--memory-budget", a.compute.memory_budget, "bytes the load may hold, e.g. 4G (default: compute.memory_budget or half of RAM)");
}

LoadRequest make_request(const LoadArgs& a, const Runtime& rt) {
  LoadRequest req = make_request(a);
  req.threads = rt.threads;
  req.memory_budget = rt.memory_budget;
  req.progress = terminal_frames_progress("decoding", a.json);  // computing: a progress line on a terminal
  return req;
}

LoadRequest make_request(const LoadArgs& a) {
  LoadRequest req;
  req.scan_shape = parse_pair(a.scan_shape, "--scan-shape");
  req.scan_region = parse_box(a.scan_region, "--scan-region");
  req.detector_region = parse_box(a.detector_region, "--detector-region");
  req.scan_bin = parse_bin(a.scan_bin, "--scan-bin");
  req.detector_bin = parse_bin(a.detector_bin, "--detector-bin");
  if (!a.frame.empty()) {
    if (req.scan_region || req.scan_bin != std::array<uint64_t, 2>{1, 1})
      throw Error(ErrorKind::InvalidArgument, "--frame cannot be combined with --scan-region or --scan-bin");
    const auto f = parse_list(a.frame, 2, "--frame");
    req.scan_region = Box{f[0], f[0] + 1, f[1], f[1] + 1};
  }
  req.dtype = a.dtype;
  req.mask_bad_pixels = !a.no_mask;
  return req;
}

}  // namespace tmorph::cli
