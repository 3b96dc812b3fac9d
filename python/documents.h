// The documents the CLI prints with --json, built for the Python module's calls: pure C++ (no Python
// object is touched), so callers run them with the GIL released.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/remote_checkpoint.h"
#include "app/runtime.h"
#include "checkpoint/checkpoint.h"
#include "index/indexer.h"
#include "interrupt.h"
#include "render/tensors/tensor_render.h"

namespace tmorph::python {

// `tensormorph backends --json`'s "backends" list.
nlohmann::json backends_document(const app::ComputeRequest& request);

// Every document below takes PATH as opened: for a remote checkpoint (app/remote_checkpoint.h) its stand-in, with
// `remote` the RemoteCheckpoint it came from; the bytes of the tensors a call reads are then fetched for that call
// and released after it (the caller shows URLs in place of stand-in paths).

// `tensormorph stats PATH [NAMES...] --json` with the request's placement flags: from PATH's index (built
// or completed as needed) when the request has no placement constraint, else computed for this call.
// Throws InvalidArgument for an unknown name, Unavailable when a strict backend served not every tensor.
// Returns null when the hook's cancel flag stopped the indexing (what was committed stays in the index).
nlohmann::json stats_document(const std::string& path, const std::vector<std::string>& names,
                              const app::ComputeRequest& request, const IndexingHook& hook = {},
                              app::RemoteCheckpoint* remote = nullptr);

// `tensormorph index PATH --json`: opens or builds PATH's index at the cache location and computes what
// it lacks (statistics and pyramids); a remote checkpoint streamed in batches (app::index_remote). Returns null
// when the hook's cancel flag stopped it.
nlohmann::json index_document(const std::string& path, const app::ComputeRequest& request, const IndexingHook& hook = {},
                              app::RemoteCheckpoint* remote = nullptr);

// What `tensormorph render PATH NAME --json` draws: the tensor's statistics indexed first (as the CLI does),
// then render_tensor. The image is RGBA8, top row first; the report as render --json prints it, without "out".
// Returns a report of null when the hook's cancel flag stopped the indexing.
struct RenderDocument {
  RgbaImage image;
  nlohmann::json report;
};
RenderDocument render_document(const std::string& path, const std::string& name, const TensorRenderRequest& render,
                               const app::ComputeRequest& request, const IndexingHook& hook = {},
                               app::RemoteCheckpoint* remote = nullptr);

// `tensormorph tile PATH NAME --level L --tile X,Y --slice S --json`: indexed first, then tile_document.
// Null when the hook's cancel flag stopped the indexing.
nlohmann::json tile_document(const std::string& path, const std::string& name, unsigned level, uint64_t slice, uint64_t x,
                             uint64_t y, const app::ComputeRequest& request, const IndexingHook& hook = {},
                             app::RemoteCheckpoint* remote = nullptr);

}  // namespace tmorph::python
