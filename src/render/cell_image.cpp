#include "render/cell_image.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "display/placed_colorize.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint32_t kMinLongSide = 256, kMinHeight = 32, kGap = kColourBarGap, kBarWidth = kColourBarWidth, kMinBarHeight = 128;
constexpr uint64_t kMaxPixels = uint64_t{1} << 26;  // 64 Mpx: refuse images nobody can open

std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

CellStat parse_cell_stat(std::string_view name) {
  if (name == "mean") return CellStat::Mean;
  if (name == "min") return CellStat::Min;
  if (name == "max") return CellStat::Max;
  if (name == "abs_max") return CellStat::AbsMax;
  if (name == "std") return CellStat::Std;
  if (name == "envelope") return CellStat::Envelope;
  throw Error(ErrorKind::InvalidArgument,
              "--stat " + std::string(name) + ": expected mean, min, max, abs_max, std or envelope");
}

std::string_view cell_stat_name(CellStat s) {
  switch (s) {
    case CellStat::Mean: return "mean";
    case CellStat::Min: return "min";
    case CellStat::Max: return "max";
    case CellStat::AbsMax: return "abs_max";
    case CellStat::Std: return "std";
    case CellStat::Envelope: return "envelope";
  }
  return "?";
}

std::vector<double> cell_values(const CellGrid& g, CellStat stat) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const size_t n = g.cells.size();
  std::vector<double> v(stat == CellStat::Envelope ? 2 * n : n);
  for (size_t i = 0; i < n; ++i) {
    const TileStats& t = g.cells[i];
    const bool any = t.finite() > 0;
    switch (stat) {
      case CellStat::Mean: v[i] = any ? t.mean() : nan; break;
      case CellStat::Min: v[i] = any ? t.min : nan; break;
      case CellStat::Max: v[i] = any ? t.max : nan; break;
      case CellStat::AbsMax: v[i] = any ? t.abs_max : nan; break;
      case CellStat::Std: v[i] = any ? t.std_dev() : nan; break;
      case CellStat::Envelope:
        v[i] = any ? t.min : nan;
        v[n + i] = any ? t.max : nan;
        break;
    }
  }
  return v;
}

CellImage render_cells(const CellGrid& g, CellStat stat, const DisplayRequest& request, const Planner& planner) {
  if (g.rows == 0 || g.cols == 0) throw Error(ErrorKind::InvalidArgument, "render: no cells to draw");
  const std::vector<double> values = cell_values(g, stat);
  CellImage out;
  out.params = resolve_params(values.data(), values.size(), request);
  ColorizeResult colours = colorize_placed(planner, values.data(), values.size(), out.params);
  out.histogram = colours.histogram;
  out.placement = std::move(colours.placement);
  const std::vector<uint8_t>& rgba = colours.rgba;

  const uint64_t per_cell = stat == CellStat::Envelope ? 2 : 1;
  const uint64_t blocks_x = g.cols * per_cell, longer = std::max(blocks_x, g.rows);
  const uint64_t s = std::max<uint64_t>(1, kMinLongSide / longer);
  out.scale_x = static_cast<uint32_t>(s);
  out.scale_y = static_cast<uint32_t>(std::max<uint64_t>(s, (kMinHeight + g.rows - 1) / g.rows));
  const uint64_t cells_w = blocks_x * out.scale_x, cells_h = g.rows * out.scale_y;
  const uint64_t width = cells_w + kGap + kBarWidth, height = std::max<uint64_t>(cells_h, kMinBarHeight);
  if (width * height > kMaxPixels)
    throw Error(ErrorKind::InvalidArgument, "render: a " + std::to_string(width) + " x " + std::to_string(height) +
                                                " image is too large; choose a coarser level");
  out.image = RgbaImage(static_cast<uint32_t>(width), static_cast<uint32_t>(height));
  out.cells_width = static_cast<uint32_t>(cells_w), out.cells_height = static_cast<uint32_t>(cells_h);
  const size_t n = g.cells.size();
  for (uint64_t y = 0; y < cells_h; ++y) {
    const uint64_t row = y / out.scale_y;
    for (uint64_t x = 0; x < cells_w; ++x) {
      const uint64_t block = x / out.scale_x, col = block / per_cell;
      const size_t value = per_cell == 2 && block % 2 ? n + row * g.cols + col : row * g.cols + col;
      std::copy_n(rgba.data() + value * 4, 4, out.image.at(static_cast<uint32_t>(x), static_cast<uint32_t>(y)));
    }
  }
  const Colormap& map = *out.params.colormap;
  for (uint64_t y = 0; y < height; ++y) {
    const uint64_t index = 255 - std::min<uint64_t>(255, y * 256 / height);
    for (uint64_t x = cells_w + kGap; x < width; ++x)
      std::copy_n(map.rgba[index], 4, out.image.at(static_cast<uint32_t>(x), static_cast<uint32_t>(y)));
  }
  return out;
}

PngText cell_image_text(const CellImage& img, CellStat stat, const std::vector<std::pair<std::string, std::string>>& more) {
  PngText text = {{"Software", "tensormorph"},
                  {"tensormorph:stat", std::string(cell_stat_name(stat))},
                  {"tensormorph:transform", std::string(transform_name(img.params.transform))},
                  {"tensormorph:colormap", std::string(img.params.colormap->name)},
                  {"tensormorph:limits", exact(img.params.limits.lo) + "," + exact(img.params.limits.hi)}};
  if (img.params.transform == Transform::Log) text.emplace_back("tensormorph:log_floor", exact(img.params.log_floor));
  text.insert(text.end(), more.begin(), more.end());
  return text;
}

}  // namespace tmorph
