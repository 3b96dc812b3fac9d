#include "render/tensors/tensor_render.h"

#include "core/json_number.h"
#include "ops/placement_json.h"
#include "tensormorph/error.h"

namespace tmorph {

TensorRender render_tensor(const CheckpointIndex& index, size_t i, const Planner& planner, const TensorRenderRequest& request) {
  TensorRender r;
  r.stat = request.stat;
  r.source = cells_for(index, i, planner, request.source);
  DisplayRequest display = request.display;
  display.colormap = request.colormap.empty() ? default_colormap(cell_values(r.source.grid, request.stat), request.stat)
                                              : std::string_view(request.colormap);
  r.image = render_cells(r.source.grid, request.stat, display, planner);
  const CellImage& img = r.image;
  nlohmann::json& j = r.report;
  j = source_json(r.source, index.checkpoint().tensors[i]);
  j["stat"] = cell_stat_name(request.stat);
  j["transform"] = transform_name(img.params.transform);
  j["colormap"] = img.params.colormap->name;
  j["limits"] = {json_number(img.params.limits.lo), json_number(img.params.limits.hi)};
  j["placement"] = placements_json({img.placement});
  j["image"] = {{"width", img.image.width}, {"height", img.image.height}, {"scale", {img.scale_x, img.scale_y}}};
  j["histogram"] = {{"counts", img.histogram.counts}, {"nan", img.histogram.nan}, {"pos_inf", img.histogram.pos_inf},
                    {"neg_inf", img.histogram.neg_inf}};
  return r;
}

PngText tensor_render_text(const TensorRender& r, const CheckpointTensor& t, uint64_t slice) {
  const CellSource& src = r.source;
  return cell_image_text(r.image, r.stat,
                         {{"tensormorph:tensor", t.name},
                          {"tensormorph:source", src.source},
                          {"tensormorph:rows", std::to_string(src.region.row_begin) + "," + std::to_string(src.region.row_end)},
                          {"tensormorph:cols", std::to_string(src.region.col_begin) + "," + std::to_string(src.region.col_end)},
                          {"tensormorph:slice", std::to_string(slice)},
                          {"tensormorph:cell", std::to_string(src.grid.cell_rows) + "x" + std::to_string(src.grid.cell_cols)}});
}

FigureFrameSpec tensor_figure_frame(const TensorRender& r, const CheckpointTensor& t, uint64_t slice) {
  const TileRange& g = r.source.region;
  FigureFrameSpec f;
  f.title = t.name + (r.source.layout.view.slices > 1 ? " SLICE " + std::to_string(slice) : "") + ": " + std::string(cell_stat_name(r.stat)) + " PER CELL";
  f.x = {"COLUMN", index_ticks(g.col_begin, g.col_end - g.col_begin, r.image.cells_width)};
  f.y = {"ROW", index_ticks(g.row_begin, g.row_end - g.row_begin, r.image.cells_height)};
  return f;
}

nlohmann::json tile_document(const CheckpointIndex& index, size_t i, unsigned level, uint64_t slice, uint64_t tx, uint64_t ty) {
  const CheckpointTensor& t = index.checkpoint().tensors[i];
  const auto info = stored_pyramid(index, i);
  check_tile(info.layout, level, slice, tx, ty);
  const auto tile = index.load_tile(i, info, level, slice, ty, tx);
  if (!tile) throw Error(ErrorKind::BadInput, index.report().database + ": tile missing from the pyramid of " + t.name);
  return tile_json(info, t, level, slice, tx, ty, *tile);
}

}  // namespace tmorph
