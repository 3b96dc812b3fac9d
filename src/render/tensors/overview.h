// Whole-checkpoint pictures: a contact sheet of every tensor, and heat strips that put one statistic of
// a family of tensors (e.g. every layer's attention query) side by side for layer-by-layer comparison.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "display/display_kernels.h"
#include "index/checkpoint_index.h"
#include "render/cell_image.h"

namespace tmorph {

class Planner;

// Writes DIR/overview.png (every readable tensor's overview, in checkpoint order, at most
// `thumb_cells` cells per side, each with its own limits and colour bar, six to a row), one PNG per
// tensor (DIR/<name>.png, '/' in names replaced by '_') and DIR/index.html naming each. Returns the
// JSON description (tensors, files, limits, placement of each thumbnail in the sheet).
nlohmann::json write_contact_sheet(const CheckpointIndex& index, const Planner& planner, const std::string& dir,
                                   CellStat stat, const DisplayRequest& display, uint64_t thumb_cells);

// The tensors whose names match `pattern`, where one '*' stands for a layer number (digits), in
// ascending layer order. Throws InvalidArgument when the pattern has no single '*' or nothing matches.
std::vector<std::pair<uint64_t, size_t>> tensors_by_layer(const Checkpoint& c, const std::string& pattern);

// One column per matching tensor, one cell per band of level-0 tile rows (256 rows of its 2-D view,
// slices one after another), the statistic over the band; limits shared by all columns, so colours
// compare across layers. Cells come from the stored pyramids (no data read).
struct StripsImage {
  CellImage image;
  std::vector<std::pair<uint64_t, std::string>> columns;  // layer number, tensor name
  uint64_t bands = 0;
};
StripsImage render_strips(const CheckpointIndex& index, const Planner& planner, const std::string& pattern, CellStat stat,
                          const DisplayRequest& display);

}  // namespace tmorph
