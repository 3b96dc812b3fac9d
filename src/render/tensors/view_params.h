// The parameters of the requests that look at one tensor of a checkpoint (core/param_schema.h): one declaration
// each, read by the server's DeclaredQuery (GET /api/tiles, cells, render, outliers and profile: docs/api.md),
// by the CLI's `render` and `tile` flags (cli/declared_flags.h) and by Python's Checkpoint.render and .tile, so
// the same value gets the same verdict and message in every face.
#pragma once

#include <utility>

#include "core/param_schema.h"

namespace tmorph {

const OperationSchema& tensor_tile_params();      // tensor.tile: level, x, y (or --tile X,Y), slice, format binary|json
const OperationSchema& tensor_cells_params();     // tensor.cells: level, x, y, slice, stat
const OperationSchema& tensor_render_params();    // tensor.render: tensor.cells' and transform, log_floor, colormap, limits, format png|json
const OperationSchema& tensor_outliers_params();  // tensor.outliers: top, nonfinite
const OperationSchema& tensor_profile_params();   // tensor.profile: row or col, slice

// The display limits LO,HI of a render, checked once the two numbers are parsed: LO must not be above HI
// (InvalidArgument naming the face's spelling of `limits`).
std::pair<double, double> check_limits(Face face, double lo, double hi);

}  // namespace tmorph
