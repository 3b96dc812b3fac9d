// Command-line arguments shared by the `tensormorph stem` subcommands: lists, regions, bins, and the
// flags that describe which frames to read and how (a LoadRequest).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/compute_flags.h"
#include "cli/number_lists.h"
#include "stem/products/detector_geometry.h"
#include "stem/load.h"

namespace tmorph::cli {

// "R0,R1,C0,C1" (empty: nullopt).
std::optional<Box> parse_box(const std::string& text, const std::string& flag);
// "N" (N x N) or "R,C" (empty: 1 x 1).
std::array<uint64_t, 2> parse_bin(const std::string& text, const std::string& flag);
// "R0,C0,R1,C1" (empty: nullopt): a rectangle of detector pixels, rows [R0, R1), columns [C0, C1).
std::optional<DetectorRect> parse_rect(const std::string& text, const std::string& flag);
// "A,B" (empty: nullopt).
std::optional<std::array<uint64_t, 2>> parse_pair(const std::string& text, const std::string& flag);

// "R,C" as two numbers, fractional allowed (empty: nullopt); throws InvalidArgument naming the flag.
std::optional<std::array<double, 2>> parse_point(const std::string& text, const std::string& flag);
// A numeric flag left at its NaN default: not given.
std::optional<double> given(double flag_value);
// --center R,C and --radius R (NaN: not given) as the domain's disk request, its errors naming the flags.
DiskRequest disk_request(const std::string& center, double radius);

struct LoadArgs {
  std::string path, out, scan_shape, scan_region, detector_region, scan_bin, detector_bin, frame, dtype = "auto";
  bool no_mask = false, json = false;
  ComputeFlags compute;
};

// --dataset /path: appended to `path` as PATH:/path (an HDF5 dataset of another writer's 4-D array, docs/stem.md).
void add_dataset_flag(CLI::App* cmd, std::string& path);

// Registers PATH and the load flags. For products (`for_products`): no --frame or --dtype, and the
// compute flags (--backend, --prefer, --never, --threads, --memory-budget) in full.
void add_load_flags(CLI::App* cmd, LoadArgs& a, bool for_products);

// The request the flags describe; threads and memory budget from the runtime (the overload without one
// leaves them at their defaults: what a cache key needs, before any plugin is loaded).
LoadRequest make_request(const LoadArgs& a, const Runtime& rt);
LoadRequest make_request(const LoadArgs& a);

// Registers `stem ssb` (single-sideband ptychography).
void add_stem_ssb_command(CLI::App* stem);

// Registers `stem movie` (GIF/MP4 of patterns along a line or a detector sweep).
void add_stem_movie_command(CLI::App* stem);

// Registers bf, abf, adf, haadf, df, mask, com, dpc, idpc, fft and mean-dp under `stem`.
void add_stem_product_commands(CLI::App* stem);

}  // namespace tmorph::cli
