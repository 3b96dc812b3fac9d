// The routes of `tensormorph serve`, registered on one httplib::Server. Each add_* function registers
// one group; all of them take the shared state, which must outlive the server.
#pragma once

#include <httplib.h>

#include "server/server_state.h"

namespace tmorph::server {

// GET /api/health, /api/checkpoints, /api/tensors, /api/tensors/{ckpt}/{name}.
void add_catalog_routes(httplib::Server& svr, ServerState& state);
// GET /api/tiles/{ckpt}/{name}, /api/cells/{ckpt}/{name}, /api/render/{ckpt}/{name}.png.
void add_tile_routes(httplib::Server& svr, ServerState& state);
// GET and POST /api/jobs, GET /api/jobs/{id}, /api/jobs/{id}/events (Server-Sent Events).
void add_job_routes(httplib::Server& svr, ServerState& state);
// GET and PUT /api/compute; GET and PUT /api/compute/webgpu (the adapter the page last reported, core/page_adapter.h).
void add_compute_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions, /api/acquisitions/{id}, /api/acquisitions/{id}/calibration,
// /api/acquisitions/{id}/products/{kind}, /api/acquisitions/{id}/frame, /api/acquisitions/{id}/block (4D-STEM,
// computed on the server's backends), GET and DELETE /api/stem/resident (the resident acquisitions; DELETE drops
// them), and through the three below /ssb, /events and /movie.
void add_stem_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions/{id}/ssb (the SSB preview; api_stem_ssb.cpp). Called by add_stem_routes.
void add_stem_ssb_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions/{id}/events (readiness as Server-Sent Events; api_stem_events.cpp). Called by add_stem_routes.
void add_stem_event_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions/{id}/movie (GIF/MP4 as `stem movie` writes; api_stem_movie.cpp). Called by add_stem_routes.
void add_stem_movie_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions/{id}/chunks (stored chunks of a frame window, for the page's decoder; api_stem_chunks.cpp).
// Called by add_stem_routes.
void add_stem_chunk_routes(httplib::Server& svr, ServerState& state);
// GET /api/acquisitions/{id}/prepared[/{kind}] (the product cache's status and its products as stored;
// api_stem_prepared.cpp). Called by add_stem_routes.
void add_stem_prepared_routes(httplib::Server& svr, ServerState& state);
// GET /api/diff/{a}/{b}, /api/diff/{a}/{b}/tiles/{tensor}, /api/diff/{a}/{b}/values/{tensor}: the difference of
// two served checkpoints (src/diff), computed on first request (api_diff.cpp).
void add_diff_routes(httplib::Server& svr, ServerState& state);
// GET and DELETE /api/progress/{id}: where a request named with progress_id is, and cancelling it (api_progress.cpp).
void add_progress_routes(httplib::Server& svr, ServerState& state);
// Every other GET: /api/... is 404 JSON; the rest are static files under state.web_root, or the
// built-in page at / when there is no web root.
void add_static_routes(httplib::Server& svr, ServerState& state);

}  // namespace tmorph::server
