#include "render/tensors/overview.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "image/bitmap_font.h"
#include "render/tensors/cell_source.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

constexpr uint32_t kSheetColumns = 6, kSheetGap = 12;
// Under each thumbnail of the sheet, two caption lines (its name, its shape) in the 5 x 7 bitmap font on the sheet's
// dark background; a slot is at least kMinSlotWidth pixels wide so that a narrow tensor's caption stays legible.
constexpr uint32_t kCaptionLineHeight = kGlyphHeight + 3, kCaptionHeight = 2 * kCaptionLineHeight + 2, kMinSlotWidth = 120;
constexpr uint8_t kSheetBackground[4] = {34, 34, 34, 255}, kCaptionInk[4] = {235, 235, 235, 255};

// `text` when it fits in width_px pixels of the bitmap font, else ".." and as much of its end as fits (a tensor's
// name differs from its neighbours' at the end: "..MLP.DOWN_PROJ.WEIGHT").
std::string fit_caption(const std::string& text, uint32_t width_px) {
  const size_t fits = (width_px + 1) / kGlyphAdvance;
  if (text.size() <= fits) return text;
  if (fits <= 2) return text.substr(0, fits);
  return ".." + text.substr(text.size() - (fits - 2));
}

std::string shape_caption(const nlohmann::json& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i].get<uint64_t>());
  return s + ")";  // the bitmap font has parentheses, not brackets
}

std::string file_name_for(const std::string& tensor) {
  std::string s = tensor;
  for (char& ch : s)
    if (ch == '/' || ch == '\\') ch = '_';
  return s + ".png";
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else if (ch == '"') out += "&quot;";
    else out += ch;
  }
  return out;
}

}  // namespace

nlohmann::json write_contact_sheet(const CheckpointIndex& index, const Planner& planner, const std::string& dir,
                                   CellStat stat, const DisplayRequest& display, uint64_t thumb_cells) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::Io, dir + ": cannot be created (" + ec.message() + ")");
  const Checkpoint& c = index.checkpoint();
  struct Thumb {
    size_t tensor;
    CellImage img;
  };
  std::vector<Thumb> thumbs;
  nlohmann::json tensors = nlohmann::json::array(), skipped = nlohmann::json::array();
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const CheckpointTensor& t = c.tensors[i];
    SourceRequest req;
    req.overview_cells = thumb_cells;
    CellSource src;
    try {
      src = cells_for(index, i, planner, req);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Unavailable) throw;
      skipped.push_back({{"name", t.name}, {"reason", e.what()}});
      continue;
    }
    DisplayRequest d = display;
    const std::vector<double> drawn = cell_values(src.grid, stat);
    const std::string map(display.colormap.empty() ? default_colormap(drawn, stat) : display.colormap);
    d.colormap = map;
    CellImage img = render_cells(src.grid, stat, d, planner);
    const std::string file = file_name_for(t.name);
    write_png(dir + "/" + file, img.image,
              cell_image_text(img, stat, {{"tensormorph:tensor", t.name}, {"tensormorph:source", src.source}}));
    nlohmann::json e = source_json(src, t);
    e["file"] = file;
    e["colormap"] = img.params.colormap->name;
    e["limits"] = {img.params.limits.lo, img.params.limits.hi};
    tensors.push_back(e);
    thumbs.push_back({i, std::move(img)});
  }
  if (thumbs.empty()) throw Error(ErrorKind::Unavailable, "no tensor of the checkpoint can be drawn");

  // The sheet: rows of kSheetColumns slots (a thumbnail over its two caption lines), each row as tall as its tallest.
  uint32_t width = 0, height = 0;
  std::vector<std::pair<uint32_t, uint32_t>> at(thumbs.size());
  std::vector<uint32_t> caption_y(thumbs.size());
  for (size_t r = 0; r * kSheetColumns < thumbs.size(); ++r) {
    uint32_t x = 0, row_h = 0;
    for (size_t k = r * kSheetColumns; k < std::min(thumbs.size(), (r + 1) * kSheetColumns); ++k) {
      at[k] = {x, height};
      x += std::max(thumbs[k].img.image.width, kMinSlotWidth) + kSheetGap;
      row_h = std::max(row_h, thumbs[k].img.image.height);
    }
    for (size_t k = r * kSheetColumns; k < std::min(thumbs.size(), (r + 1) * kSheetColumns); ++k) caption_y[k] = height + row_h + 2;
    width = std::max(width, x);
    height += row_h + kCaptionHeight + kSheetGap;
  }
  RgbaImage sheet(width, height);
  for (uint32_t y = 0; y < height; ++y)
    for (uint32_t x = 0; x < width; ++x) std::copy_n(kSheetBackground, 4, sheet.at(x, y));
  for (size_t k = 0; k < thumbs.size(); ++k) {
    const RgbaImage& img = thumbs[k].img.image;
    for (uint32_t y = 0; y < img.height; ++y)
      std::copy_n(img.pixels.data() + size_t{y} * img.width * 4, size_t{img.width} * 4, sheet.at(at[k].first, at[k].second + y));
    const uint32_t slot = std::max(img.width, kMinSlotWidth);
    const std::vector<std::string> lines = {fit_caption(tensors[k]["tensor"].get<std::string>(), slot),
                                            fit_caption(shape_caption(tensors[k]["shape"]), slot)};
    for (size_t l = 0; l < lines.size(); ++l)
      draw_text(sheet, at[k].first, caption_y[k] + static_cast<uint32_t>(l) * kCaptionLineHeight, lines[l], kCaptionInk);
    tensors[k]["sheet"] = {{"x", at[k].first},
                           {"y", at[k].second},
                           {"width", img.width},
                           {"height", img.height},
                           {"caption", {{"y", caption_y[k]}, {"height", kCaptionHeight}, {"lines", lines}}}};
  }
  write_png(dir + "/overview.png", sheet, {{"Software", "tensormorph"}, {"tensormorph:stat", std::string(cell_stat_name(stat))}});

  std::ofstream html(dir + "/index.html");
  html << "<!doctype html>\n<meta charset=\"utf-8\">\n<title>tensormorph overview</title>\n"
          "<style>body{font-family:sans-serif;background:#222;color:#eee}figure{display:inline-block;margin:8px;"
          "vertical-align:top}img{image-rendering:pixelated;max-width:400px}figcaption{font-size:12px}</style>\n";
  for (const auto& e : tensors) {
    html << "<figure><img src=\"" << html_escape(e["file"].get<std::string>()) << "\"><figcaption>"
         << html_escape(e["tensor"].get<std::string>()) << " " << e["shape"].dump() << "<br>" << cell_stat_name(stat) << ", "
         << html_escape(e["colormap"].get<std::string>()) << " [" << e["limits"][0].dump() << ", " << e["limits"][1].dump()
         << "]</figcaption></figure>\n";
  }
  if (!html) throw Error(ErrorKind::Io, dir + "/index.html: write failed");
  return {{"dir", dir}, {"sheet", "overview.png"}, {"stat", cell_stat_name(stat)}, {"tensors", tensors}, {"skipped", skipped}};
}

std::vector<std::pair<uint64_t, size_t>> tensors_by_layer(const Checkpoint& c, const std::string& pattern) {
  const size_t star = pattern.find('*');
  if (star == std::string::npos || pattern.find('*', star + 1) != std::string::npos)
    throw Error(ErrorKind::InvalidArgument, "--strips " + pattern + ": expected one '*' standing for the layer number");
  const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  std::vector<std::pair<uint64_t, size_t>> out;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const std::string& n = c.tensors[i].name;
    if (n.size() <= head.size() + tail.size() || n.compare(0, head.size(), head) != 0 ||
        n.compare(n.size() - tail.size(), tail.size(), tail) != 0)
      continue;
    const std::string digits = n.substr(head.size(), n.size() - head.size() - tail.size());
    if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    out.emplace_back(std::stoull(digits), i);
  }
  if (out.empty()) throw Error(ErrorKind::InvalidArgument, "--strips " + pattern + ": no tensor name matches");
  std::sort(out.begin(), out.end());
  return out;
}

StripsImage render_strips(const CheckpointIndex& index, const Planner& planner, const std::string& pattern, CellStat stat,
                          const DisplayRequest& display) {
  StripsImage out;
  const auto layers = tensors_by_layer(index.checkpoint(), pattern);
  std::vector<std::vector<TileStats>> columns;
  for (const auto& [layer, i] : layers) {
    const auto info = stored_pyramid(index, i);
    const auto& g = info.layout.levels[0];
    std::vector<TileStats> bands;
    for (uint64_t s = 0; s < info.layout.view.slices; ++s) {
      const std::vector<TileStats> tiles = index.load_tiles(i, info, 0, s, 0, g.rows, 0, g.cols);
      for (uint64_t y = 0; y < g.rows; ++y) {
        TileStats band;
        for (uint64_t x = 0; x < g.cols; ++x) merge_into(band, tiles[y * g.cols + x]);
        band.hist.clear();
        bands.push_back(std::move(band));
      }
    }
    out.bands = std::max<uint64_t>(out.bands, bands.size());
    out.columns.emplace_back(layer, index.checkpoint().tensors[i].name);
    columns.push_back(std::move(bands));
  }
  CellGrid grid;
  grid.rows = out.bands;
  grid.cols = columns.size();
  grid.cells.resize(grid.rows * grid.cols);  // shorter columns end in empty (transparent) cells
  for (size_t x = 0; x < columns.size(); ++x)
    for (size_t y = 0; y < columns[x].size(); ++y) grid.cells[y * grid.cols + x] = columns[x][y];
  DisplayRequest d = display;
  const std::vector<double> drawn = cell_values(grid, stat);
  const std::string map(display.colormap.empty() ? default_colormap(drawn, stat) : display.colormap);
  d.colormap = map;
  out.image = render_cells(grid, stat, d, planner);
  return out;
}

}  // namespace tmorph
