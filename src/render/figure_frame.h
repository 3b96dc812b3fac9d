// A written figure's frame (the CLI's PNG figures): around a labelled cell image (colour_bar_ticks.h), a title above
// and the cells' axes under and left of them, with tick marks and labels in the figure's units (element indices for
// a tensor; nm or scan positions for a 4D-STEM scan image, detector pixels for a pattern). The cells, the bar and
// its labels keep their pixels; the image grows on every side, on opaque white paper, and the PNG's layout text
// moves with them (every *_box entry is offset by the frame) and says what the axes show.
//
// Contract: a tick at `pixel` p marks the cells' column (row) p, counted from the cells' left (top) edge, so the
// label of element index i stands at i's left (top) edge: p = (i - first) * pixels / count. Labels use the 5 x 7
// bitmap font (upper case); a label that would overlap the previous one, or leave the image, is dropped. The x axis
// runs under the cells, or under the colour bar when that is taller (cells under 128 pixels high), so that no pixel
// of the labelled image changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <string_view>

#include "image/png_encoder.h"
#include "image/rgba_image.h"
#include "render/cell_image.h"

namespace tmorph {

struct FigureTick {
  double pixel = 0;  // along the cells' block, from its left (top) edge
  std::string label;
};

struct FigureAxis {
  std::string label;  // e.g. "COLUMN", "SCAN X (NM)"
  std::vector<FigureTick> ticks;
};

struct FigureFrameSpec {
  std::string title;
  FigureAxis x, y;
};

struct FramedFigure {
  RgbaImage image;
  uint32_t left = 0, top = 0;  // where the labelled image now starts
};

// Ticks at whole element indices of [first, first + count) drawn over `pixels` pixels: 1-2-5 multiples, about one
// per 60 pixels (at least 2 when the axis holds 2 elements).
std::vector<FigureTick> index_ticks(uint64_t first, uint64_t count, uint32_t pixels);
// Ticks in physical units across `pixels` pixels spanning `extent` units from 0: 1-2-5 multiples, %g labels.
std::vector<FigureTick> unit_ticks(double extent, uint32_t pixels);

// `labelled` (whose cells are the cells_w x cells_h block at its top left) inside its frame.
FramedFigure frame_figure(const RgbaImage& labelled, uint32_t cells_w, uint32_t cells_h, const FigureFrameSpec& spec);

// The PNG text entries of a framed figure: `layout` (colour_bar_layout_text's) with every *_box moved by the
// frame, plus tensormorph:figure_title, tensormorph:x_axis and tensormorph:y_axis ("LABEL: t1;t2;...").
PngText framed_layout_text(const PngText& layout, const FramedFigure& f, const FigureFrameSpec& spec);

// write_labelled_png (colour_bar_ticks.h) inside the frame: the figure the CLI writes for a tensor or a product.
void write_framed_png(const std::string& path, const CellImage& img, PngText text, std::string_view bar_title, const FigureFrameSpec& spec);

}  // namespace tmorph
