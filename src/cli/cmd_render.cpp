// tensormorph render / tile: images and tile statistics from a tensor's statistics pyramid, read from
// the index (indexed on demand) or, below the pyramid's finest level, from the values themselves.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/remote_checkpoint.h"
#include "cli/commands.h"
#include "cli/remote_note.h"
#include "cli/index_access.h"
#include "cli/number_lists.h"
#include "cli/output.h"
#include "cli/output_format.h"
#include "cli/product_output.h"
#include "render/tensors/cell_source.h"
#include "render/tensors/overview.h"
#include "cli/compute_flags.h"
#include "cli/declared_flags.h"
#include "render/cell_image.h"
#include "render/colour_bar_ticks.h"
#include "render/tensors/tensor_render.h"
#include "render/tensors/view_params.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct RenderArgs {
  std::string path, tensor, out, index_path, view, tile, limits, stat = "mean", transform = "linear", colormap, strips;
  bool overview = false;
  uint64_t thumb_cells = 128;
  int level = -1;
  uint64_t slice = 0;
  double log_floor = kDefaultLogFloor;
  bool json = false;
  ComputeFlags compute;
};

// --tile X,Y (checked against the declaration when parsed: tensor_render_params) as (column, row).
std::pair<uint64_t, uint64_t> tile_flag(const std::string& text) {
  const std::vector<uint64_t> xy = parse_counts(tensor_render_params().at("tile"), Face::Cli, text);
  return {xy[0], xy[1]};
}

DisplayRequest display_request(const RenderArgs& a) {
  DisplayRequest display;
  display.transform = parse_transform(a.transform);
  display.log_floor = a.log_floor;
  if (!a.limits.empty()) {
    const std::vector<double> lh = parse_numbers(tensor_render_params().at("limits"), Face::Cli, a.limits);
    std::tie(display.lo, display.hi) = check_limits(Face::Cli, lh[0], lh[1]);
  }
  display.colormap = a.colormap;  // empty: chosen from the values drawn
  return display;
}

// The colour bar's title in a written figure: the statistic and a non-linear transform ("ABS_MAX LOG").
std::string figure_title(CellStat stat, const CellImage& img) {
  std::string title(cell_stat_name(stat));
  if (img.params.transform != Transform::Linear) title += " " + std::string(transform_name(img.params.transform));
  return title;
}

// render PATH --overview -o DIR: every tensor; render PATH --strips PATTERN -o OUT.png: one family.
void run_checkpoint_render(const RenderArgs& a, const Runtime& rt, CheckpointIndex& index) {
  fill_index(index, rt, {}, a.json);
  const CellStat stat = parse_cell_stat(a.stat);
  nlohmann::json j;
  if (a.overview) {
    j = write_contact_sheet(index, rt.planner(), a.out, stat, display_request(a), a.thumb_cells);
    if (!a.json)
      std::printf("%s/overview.png: %zu tensors (%zu skipped), one PNG each and index.html in %s\n", a.out.c_str(),
                  j["tensors"].size(), j["skipped"].size(), a.out.c_str());
  } else {
    const Planner planner = rt.planner();
    const StripsImage s = render_strips(index, planner, a.strips, stat, display_request(a));
    write_labelled_png(a.out, s.image,
                       cell_image_text(s.image, stat, {{"tensormorph:strips", a.strips}, {"tensormorph:bands", std::to_string(s.bands)}}),
                       figure_title(stat, s.image));
    nlohmann::json cols = nlohmann::json::array();
    for (const auto& [layer, name] : s.columns) cols.push_back({{"layer", layer}, {"tensor", name}});
    j = {{"out", a.out}, {"pattern", a.strips}, {"stat", cell_stat_name(stat)}, {"columns", cols}, {"bands", s.bands},
         {"colormap", s.image.params.colormap->name}, {"limits", {s.image.params.limits.lo, s.image.params.limits.hi}}};
    if (!a.json)
      std::printf("%s: %s of %zu tensors side by side (%llu bands of 256 rows), limits [%s, %s]\n", a.out.c_str(),
                  a.stat.c_str(), s.columns.size(), static_cast<unsigned long long>(s.bands),
                  fmt(s.image.params.limits.lo).c_str(), fmt(s.image.params.limits.hi).c_str());
  }
  if (a.json) print_json(j);
}

// --overview and --strips of a remote checkpoint read the index only: every tensor must be in it (fetching every
// tensor is `index URL`'s job, with its batches and resumption).
void refuse_unindexed_remote(const std::string& url, const CheckpointIndex& index) {
  size_t missing = 0;
  for (size_t i = 0; i < index.checkpoint().tensors.size(); ++i)
    missing += index.checkpoint().tensors[i].readable() && !index.has_stats(i);
  if (missing)
    throw Error(ErrorKind::Unavailable, url + ": " + std::to_string(missing) + " tensor(s) are not indexed yet, and --overview and --strips "
                                              "of a remote checkpoint draw from its index: run `tensormorph index " + url + "` first");
}

void run_render(const RenderArgs& a) {
  if (!a.overview) output_format(a.out, {OutputFormat::png});  // a PNG (a folder with --overview): refused before work
  const auto rt = command_runtime(&a.compute);
  // http(s)://, hf:// or s3://: headers into stand-ins; the drawn tensor's bytes fetched while it is drawn.
  const auto remote = app::open_remote_if_url(a.path);
  const RemoteTransferNote note(remote.get());
  auto index = open_index(remote ? remote->local_path() : a.path, a.index_path);
  if (a.overview || !a.strips.empty()) {
    if (!a.tensor.empty() || a.level >= 0 || !a.tile.empty())
      throw Error(ErrorKind::InvalidArgument, "--overview and --strips draw many tensors: give no tensor, --level or --tile");
    if (a.overview && !a.strips.empty()) throw Error(ErrorKind::InvalidArgument, "give --overview or --strips, not both");
    if (remote) refuse_unindexed_remote(a.path, *index);
    run_checkpoint_render(a, *rt, *index);
    return;
  }
  if (a.tensor.empty()) throw Error(ErrorKind::InvalidArgument, "render: name a tensor (or use --overview / --strips)");
  const size_t i = index->checkpoint().position(a.tensor, a.path);
  const app::FetchedTensors fetched(remote.get(), index->checkpoint(), {i});
  fill_index(*index, *rt, {i}, a.json);
  TensorRenderRequest req;
  req.source.level = a.level;
  req.source.slice = a.slice;
  if (!a.tile.empty()) req.source.tile = tile_flag(a.tile);
  req.source.view = a.view;
  req.stat = parse_cell_stat(a.stat);
  req.display = display_request(a);
  req.colormap = a.colormap;
  const Planner planner = rt->planner();
  const TensorRender r = render_tensor(*index, i, planner, req);
  const CheckpointTensor& t = index->checkpoint().tensors[i];
  write_framed_png(a.out, r.image, tensor_render_text(r, t, a.slice), figure_title(req.stat, r.image), tensor_figure_frame(r, t, a.slice));
  nlohmann::json j = r.report;
  j["out"] = a.out;
  const CellSource& src = r.source;
  const CellImage& img = r.image;
  if (a.json) {
    print_json(j);
    return;
  }
  std::printf("%s: %s of %s, %s, %llu x %llu cells of %llu x %llu elements (%s), limits [%s, %s]\n", a.out.c_str(),
              a.stat.c_str(), t.name.c_str(), std::string(img.params.colormap->name).c_str(),
              static_cast<unsigned long long>(src.grid.rows), static_cast<unsigned long long>(src.grid.cols),
              static_cast<unsigned long long>(src.grid.cell_rows), static_cast<unsigned long long>(src.grid.cell_cols),
              src.source.c_str(), fmt(img.params.limits.lo).c_str(), fmt(img.params.limits.hi).c_str());
}

struct TileArgs {
  std::string path, tensor, index_path, tile;
  unsigned level = 0;
  uint64_t slice = 0;
  bool json = false;
  ComputeFlags compute;
};

void run_tile(const TileArgs& a) {
  const auto rt = command_runtime(&a.compute);
  const auto remote = app::open_remote_if_url(a.path);
  const RemoteTransferNote note(remote.get());
  auto index = open_index(remote ? remote->local_path() : a.path, a.index_path);
  const size_t i = index->checkpoint().position(a.tensor, a.path);
  {  // a tile's statistics come from the index: a remote tensor's bytes are fetched only to index it
    const app::FetchedTensors fetched(remote && !index->has_stats(i) ? remote.get() : nullptr, index->checkpoint(), {i});
    fill_index(*index, *rt, {i}, a.json);
  }
  const auto [tx, ty] = tile_flag(a.tile);
  const CheckpointTensor& t = index->checkpoint().tensors[i];
  const nlohmann::json j = tile_document(*index, i, a.level, a.slice, tx, ty);
  if (a.json) {
    print_json(j);
    return;
  }
  const auto u = [](const nlohmann::json& v) { return static_cast<unsigned long long>(v.get<uint64_t>()); };
  const auto number = [](const nlohmann::json& v) { return v.is_number() ? fmt(v.get<double>()) : v.get<std::string>(); };
  const nlohmann::json& st = j["stats"];
  std::printf("%s  level %u  tile %llu,%llu  slice %llu  rows [%llu, %llu)  cols [%llu, %llu)\n", t.name.c_str(), a.level,
              static_cast<unsigned long long>(tx), static_cast<unsigned long long>(ty),
              static_cast<unsigned long long>(a.slice), u(j["rows"][0]), u(j["rows"][1]), u(j["cols"][0]), u(j["cols"][1]));
  print_rows(std::vector<std::pair<std::string, std::string>>{
      {"count", std::to_string(st["count"].get<uint64_t>())},
      {"nan / inf / zero", std::to_string(st["nan_count"].get<uint64_t>()) + " / " + std::to_string(st["inf_count"].get<uint64_t>()) +
                               " / " + std::to_string(st["zero_count"].get<uint64_t>())},
      {"min", number(st["min"])},
      {"max", number(st["max"])},
      {"abs_max", number(st["abs_max"])},
      {"sum", number(st["sum"])},
      {"mean", number(st["mean"])},
      {"std", number(st["std"])}});
}

}  // namespace

void add_render_commands(CLI::App& app) {
  auto r = std::make_shared<RenderArgs>();
  CLI::App* cmd = app.add_subcommand("render", "draw a tensor (overview, one pyramid level, or one tile) as a PNG with a "
                                               "colour bar; exact cell statistics from its pyramid or its values");
  cmd->add_option("path", r->path, "checkpoint")->required();
  cmd->add_option("tensor", r->tensor, "tensor name (none with --overview or --strips)");
  cmd->add_option("-o,--out", r->out, "output PNG (a directory with --overview)")->required();
  cmd->add_flag("--overview", r->overview, "every tensor: DIR/overview.png (contact sheet), one PNG each, index.html");
  cmd->add_option("--thumb-cells", r->thumb_cells, "--overview: at most this many cells per side (default 128)");
  cmd->add_option("--strips", r->strips, "PATTERN with one '*' for the layer number (e.g. 'blk.*.attn_q.weight'): one "
                                         "column per layer, one cell per 256 rows, shared limits");
  cmd->add_option("--level", r->level, "pyramid level (0: 256 x 256-element tiles; each level halves the grid)");
  cmd->add_option("--tile", r->tile, "X,Y: draw only this tile of --level (column, row), one cell per 1/256 of it");
  cmd->add_option("--slice", r->slice, "slice of a tensor of rank >= 3 (default 0)");
  cmd->add_option("--stat", r->stat, "statistic per cell: mean, min, max, abs_max, std, envelope (min|max per cell)");
  cmd->add_option("--transform", r->transform, "linear, log (log10 |x|), signed-log (sign(x) log1p |x|)");
  cmd->add_option("--log-floor", r->log_floor, "smallest |x| under --transform log (default 1e-12)");
  cmd->add_option("--colormap", r->colormap, "gray, viridis, plasma, inferno, magma, cividis, turbo, RdBu_r, seismic, "
                                             "coolwarm, twilight (default: RdBu_r for signed values, else viridis)");
  cmd->add_option("--limits", r->limits, "LO,HI in data units (default: the drawn values' finite range)");
  cmd->add_option("--view", r->view, "S,R: the first S axes index slices, the next R make rows (default: leading axes "
                                     "are slices, then rows x columns)");
  cmd->add_flag("--json", r->json, "print what was drawn as JSON");
  add_index_option(cmd, r->index_path);
  r->compute.add_to(cmd);
  validate_declared_flags(cmd, tensor_render_params());
  cmd->callback([r] { run_render(*r); });

  auto t = std::make_shared<TileArgs>();
  CLI::App* tile = app.add_subcommand("tile", "exact statistics of one tile of a tensor's pyramid, with the elements it covers");
  tile->add_option("path", t->path, "checkpoint")->required();
  tile->add_option("tensor", t->tensor, "tensor name")->required();
  tile->add_option("--level", t->level, "pyramid level")->required();
  tile->add_option("--tile", t->tile, "X,Y (column, row) at that level")->required();
  tile->add_option("--slice", t->slice, "slice of a tensor of rank >= 3 (default 0)");
  tile->add_flag("--json", t->json, "print JSON");
  add_index_option(tile, t->index_path);
  t->compute.add_to(tile);
  validate_declared_flags(tile, tensor_tile_params());
  tile->callback([t] { run_tile(*t); });
}

}  // namespace tmorph::cli
