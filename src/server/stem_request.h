// What every 4D-STEM endpoint of `tensormorph serve` shares: finding a served acquisition by id, reopening it
// (headers only, so readiness follows files still being written), its readiness summary, query parameters with
// errors naming the parameter, and sending numbers as JSON or as the bytes of the CLI's .npy.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "stem/acquisition.h"
#include "stem/products/detector_geometry.h"
#include "server/declared_query.h"
#include "server/http_util.h"
#include "server/server_state.h"
#include "stem/load.h"
#include "support/cancel.h"

namespace tmorph::server {

// The acquisition with this id; HttpError 404 naming it otherwise.
ServedAcquisition& find_acquisition(ServerState& state, const std::string& id);
// Opens the acquisition again (headers only), so readiness follows files still being written.
Acquisition reopen(const ServedAcquisition& a);
// Products: the acquisition opened by an earlier product request while its files are unchanged (the master, the
// path served and every data file: name, size, modification time and first bytes, as its signature is computed) and it
// was complete then; else opened again (an acquisition being written is always opened again).
std::shared_ptr<const Acquisition> reopen_for_products(ServedAcquisition& a);
// `stem inspect --json`'s document (readiness included) plus id, path and name: GET /api/acquisitions/{id}.
nlohmann::json summary_json(const ServedAcquisition& a, const Acquisition& acq);
// Products, SSB and frames read complete acquisitions only: a scan still being written is reported (409 listing
// the readiness problems), not guessed at.
void require_complete(const Acquisition& acq);
// Products only: also a scan region whose frames are all written (the rows before the first missing frame) while
// the rest is still being written, when no problem changes values; otherwise require_complete's 409.
void require_region_written(const Acquisition& acq, const LoadRequest& load);

// The progress entry of a request naming progress_id (null when it names none; operation_progress.h): its frames
// are reported into it as they are decoded and its cancel flag is checked between frame batches.
std::shared_ptr<OperationProgress> track_load(ServerState& state, const DeclaredQuery& q, LoadRequest& load);
// Runs `f` (the request's computation), waiting for the compute lock first under the stage that says so; a
// cancellation (DELETE /api/progress/ID) becomes HttpError 409 "cancelled".
template <class F>
auto run_tracked(ServerState& state, OperationProgress* p, F&& f) {
  if (p) p->set_stage("waiting for the compute lock (the server runs one computation at a time)");
  try {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);  // placed ops run one at a time
    check_cancel(p ? &p->cancel_flag() : nullptr);  // cancelled before it started, or while it waited
    if (p) p->set_stage("running");
    return f();
  } catch (const Cancelled&) {
    throw HttpError(409, "cancelled: the request was cancelled (DELETE /api/progress/...)");
  }
}

// `text` as exactly `count` comma-separated unsigned integers (decimal, at most 15 digits each); otherwise
// HttpError 400 "parameter 'NAME': expected EXPECTED, got 'WHOLE'" (`whole`: the parameter's full text, of which
// `text` may be a part). The one parser of the 4-D STEM endpoints' integer lists.
std::vector<uint64_t> unsigned_list(const std::string& text, size_t count, const char* name, const std::string& expected,
                                    const std::string& whole);
// The declared list parameter `name` (Counts of 2, Numbers of 2) as an array; nullopt when absent.
std::optional<std::array<uint64_t, 2>> pair_param(const DeclaredQuery& q, std::string_view name);
std::optional<std::array<double, 2>> point_param(const DeclaredQuery& q, std::string_view name);
// The view a page works in, as the CLI's --scan-region and --detector-bin: scan_region=R0,R1,C0,C1 (half-open
// scan rows and columns) and detector_bin=N (N x N detector pixels summed per pixel; the last bins hold fewer
// when N does not divide the detector), into `load`, which refuses a region outside the scan. `region` false:
// scan_region is not read (the frame endpoint sets its own). Kinds and ranges as the operation declares them.
void view_params(const DeclaredQuery& q, LoadRequest& load, bool region = true);
// center=ROW,COL and radius= (unbinned detector pixels) as the domain's disk request; absent: detected.
DiskRequest disk_params(const DeclaredQuery& q);
// format=json (default) or npy, as declared.
std::string format_param(const DeclaredQuery& q);

// format "npy": the bytes `-o FILE.npy` writes (descr, shape, values); else `doc` plus shape, dtype (the descr)
// and values (row-major).
template <class T>
void send_values(httplib::Response& res, const std::string& format, const std::string& descr, const std::vector<uint64_t>& shape,
                 const std::vector<T>& values, nlohmann::json doc) {
  if (format == "npy") {
    std::string body = npy_preamble(descr, shape);
    const size_t head = body.size();
    body.resize(head + values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(body.data() + head, values.data(), values.size() * sizeof(T));
    res.set_content(std::move(body), "application/octet-stream");
    return;
  }
  doc["shape"] = shape;
  doc["dtype"] = descr;
  doc["values"] = values;
  send_json(res, doc);
}


}  // namespace tmorph::server
