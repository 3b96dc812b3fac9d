// The parameters of the difference requests (core/param_schema.h): one declaration read by the server's
// DeclaredQuery for GET /api/diff/… (docs/api.md "Differences"). The CLI's `diff` and Python's tm.diff spell the
// same things --top / --level and top= / level=; their own parsers are older than these rows.
#pragma once

#include "core/param_schema.h"

namespace tmorph {

const OperationSchema& diff_document_params();  // diff.document: GET /api/diff/{a}/{b}  (top)
const OperationSchema& diff_tiles_params();     // diff.tiles: GET /api/diff/{a}/{b}/tiles/{tensor}  (level, slice, x, y, window)
const OperationSchema& diff_values_params();    // diff.values: GET /api/diff/{a}/{b}/values/{tensor}  (level, slice, x, y)

// The most tiles one GET …/tiles answers at once (its window's width x height).
constexpr uint64_t kMaxDiffTilesPerRequest = 4096;

}  // namespace tmorph
