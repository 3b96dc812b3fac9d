// The 4D-STEM endpoints: the acquisitions served (with their readiness, current while files are still being
// written), one in detail, any product the CLI's `stem bf|…|mean-dp|fft` computes (the same domain call, placed
// on the server's backends by the planner and reported), and one scan position's diffraction pattern. The face
// parses and prints; the science is stem/'s.
#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/npy.h"
#include "stem/acquisition.h"
#include "ops/placement_json.h"
#include "stem/products/calibration_document.h"
#include "stem/inspect_document.h"
#include "stem/load.h"
#include "stem/products/product_run.h"
#include "stem/resident/resident_store.h"
#include "stem/runs/request_params.h"

#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"

namespace tmorph::server {

namespace {

// GET /api/acquisitions/{id}/products/{kind}?inner=&outer=&inner_mrad=&outer_mrad=&rect=R0,C0,R1,C1&center=ROW,COL&radius=
//     &max=1&of=KIND&rotation_deg=&transpose=1&scan_shape=ROWS,COLS&scan_region=R0,R1,C0,C1&detector_bin=N&format=json|npy
// The product `kind` (mean-dp, bf, abf, adf, haadf, df, mask, com, dpc, idpc, fft; docs/api.md), as
// `tensormorph stem KIND` computes it.
void get_product(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const std::string kind_name = req.matches[2];
  const auto kind = product_kind_from_name(kind_name);
  if (!kind) throw HttpError(404, "no product '" + kind_name + "' (expected mean-dp, bf, abf, adf, haadf, df, mask, com, dpc, idpc or fft)");
  const DeclaredQuery q(req, product_params());
  const std::string format = format_param(q);
  ProductSpec spec;
  spec.kind = *kind;
  spec.load.scan_shape = pair_param(q, "scan_shape");
  view_params(q, spec.load);
  if (const auto of = q.choice("of")) spec.of = product_kind_from_name(*of);
  spec.max_pattern = q.on("max", false);
  spec.rotation = {q.number("rotation_deg"), q.on("transpose", false)};  // dpc, idpc
  spec.disk = disk_params(q);
  spec.detector.inner_px = q.number("inner");
  spec.detector.outer_px = q.number("outer");
  spec.detector.inner_mrad = q.number("inner_mrad");
  spec.detector.outer_mrad = q.number("outer_mrad");
  if (const auto r = q.counts("rect")) spec.detector.rect = DetectorRect{(*r)[0], (*r)[1], (*r)[2], (*r)[3]};
  spec.detector.kind = product_source(spec);
  const DetectorRequest& d = spec.detector;
  if (product_source(spec) == ProductKind::mask && !d.inner_px && !d.outer_px && !d.inner_mrad && !d.outer_mrad && !d.rect)
    throw HttpError(400, "product mask: give inner/outer (pixels), inner_mrad/outer_mrad, or rect=R0,C0,R1,C1");
  if (d.rect && product_source(spec) != ProductKind::mask)
    throw HttpError(400, std::string("parameter 'rect': only mask (or fft of=mask) takes a rectangle, not ") + product_name(product_source(spec)));
  check_product_request(spec, Face::Http);
  const std::shared_ptr<const Acquisition> opened = reopen_for_products(served);
  const Acquisition& acq = *opened;
  require_region_written(acq, spec.load);  // a region already written is served while the rest is being written
  const auto rt = state.compute.current();
  spec.load.threads = rt->threads;
  spec.load.memory_budget = rt->memory_budget;
  const Planner planner = rt->planner();
  ProgressScope tracked(track_load(state, q, spec.load));  // progress_id: GET / DELETE /api/progress/{id}
  ProductOutput out = run_tracked(state, tracked.get(), [&] {
    return compute_product(acq, spec, std::nullopt, [&]() -> const Planner& { return planner; });
  });
  tracked.done();
  nlohmann::json doc = std::move(out.report);
  doc["acquisition"] = served.id;
  doc["product"] = product_name(*kind);
  doc["placement"] = placements_json(out.placements);
  std::visit([&](const auto& values) { send_values(res, format, out.npy_descr, out.shape, values, std::move(doc)); }, out.values);
}

// GET /api/acquisitions/{id}/calibration[?scan_shape=ROWS,COLS][&kv=&semiangle_mrad=&scan_step_A=&detector_mrad_per_px=]: every calibration value the products and SSB use,
// each with its unit and source (or why it is missing), and the bright-field disk (one pattern pass, placed; the
// product cache's, with `prepared` its build time and no placement, when the cache answers the acquisition).
void get_calibration(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, calibration_params());
  LoadRequest load;
  load.scan_shape = pair_param(q, "scan_shape");
  // The overrides SSB takes, by the same names (a value the file lacks is "missing ... give kv").
  const auto kv = q.number("kv");
  const CalibrationOverrides overrides{{kv ? std::optional<double>(*kv * 1e3) : std::nullopt, "kv"},
                                       {q.number("semiangle_mrad"), "semiangle_mrad"},
                                       {q.number("scan_step_A"), "scan_step_A"},
                                       {q.number("detector_mrad_per_px"), "detector_mrad_per_px"}};
  const Acquisition acq = reopen(served);
  require_complete(acq);
  const auto rt = state.compute.current();
  load.threads = rt->threads;
  load.memory_budget = rt->memory_budget;
  const Planner planner = rt->planner();
  std::vector<Placement> placements;
  nlohmann::json doc;
  // A prepared acquisition's disk is the cache's (the same detection, stored): no pattern pass.
  if (const PreparedLookup prepared = find_prepared(state.product_cache, acq, load); prepared.products) {
    doc = calibration_document(acq, load, ResolvedDisk{prepared.products->disk, "detected (prepared)", true}, overrides);
    doc["prepared"] = prepared.status["entry"]["created"];
  } else {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
    doc = calibration_document(acq, load, DiskRequest{}, overrides, planner, &placements);
  }
  doc["acquisition"] = served.id;
  doc["placement"] = placements_json(placements);
  send_json(res, doc);
}

// GET /api/acquisitions/{id}/frame?row=&col=[&scan_shape=ROWS,COLS][&detector_bin=N][&masked=0][&format=json|npy]: the diffraction
// pattern at one scan position, decoded on the server (bad pixels and sentinels zeroed unless masked=0).
void get_frame(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, frame_params());
  const std::string format = format_param(q);
  const auto row = q.count("row"), col = q.count("col");
  if (!row || !col) throw HttpError(400, "parameters 'row' and 'col' (the scan position) are required");
  LoadRequest load;
  load.scan_shape = pair_param(q, "scan_shape");
  view_params(q, load, false);
  load.mask_bad_pixels = q.on("masked", true);
  const Acquisition acq = reopen(served);
  require_complete(acq);
  const std::array<uint64_t, 2> scan = resolve_scan_shape(acq, load.scan_shape);
  if (*row >= scan[0] || *col >= scan[1])
    throw HttpError(400, "scan position (" + std::to_string(*row) + ", " + std::to_string(*col) + ") is outside the " +
                             std::to_string(scan[0]) + " x " + std::to_string(scan[1]) + " scan");
  load.scan_shape = scan;
  load.scan_region = Box{*row, *row + 1, *col, *col + 1};
  const StemArray frame = load_stem(acq, load);
  const std::vector<uint64_t> shape = {frame.shape[2], frame.shape[3]};
  const nlohmann::json doc = {{"acquisition", served.id}, {"position", {*row, *col}}, {"provenance", frame.provenance}};
  bool widen = false;
  const std::string descr = npy_descr(frame.dtype, &widen);
  const auto send = [&]<class T>(T) {  // the frame's values as T (its stored dtype: u8, u16, u32; float32 for EMPAD)
    std::vector<T> values(frame.bytes / sizeof(T));
    if (frame.bytes) std::memcpy(values.data(), frame.data.get(), frame.bytes);
    send_values(res, format, descr, shape, values, doc);
  };
  if (frame.dtype == DType::U8) send(uint8_t{});
  else if (frame.dtype == DType::U16) send(uint16_t{});
  else if (frame.dtype == DType::F32) send(float{});
  else if (frame.dtype == DType::F64) send(double{});
  else send(uint32_t{});
}

// The most bytes GET …/block serves (the whole acquisition, decoded): the page keeps the block in its adapter's
// memory, whose limits it checks itself; beyond this the server's products are the way.
constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

// GET /api/acquisitions/{id}/block[?scan_shape=R,C][&scan_region=R0,R1,C0,C1][&detector_bin=N][&rows=R0,R1]: every frame (of the region, binned; of
// its scan rows [R0, R1) when `rows` is given), decoded and masked as the products see them
// (bad pixels and sentinels zeroed), row-major [scan row, scan col, detector row, detector col] in the stored
// dtype, little-endian, zero-padded to a multiple of 4 bytes: the layout the page's WGSL kernels read as u32
// words. Headers X-Block-Shape "R,C,KR,KC" (of the rows sent), X-Block-Dtype (u8, u16 or u32) and X-Block-View-Bytes
// (the whole view's unpadded bytes, so a client fetching bands knows the total). 409 beyond 1 GiB (the whole view), and for float
// frames (EMPAD), which those kernels do not read.
void get_block(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, block_params());
  LoadRequest load;
  load.scan_shape = pair_param(q, "scan_shape");
  view_params(q, load);
  const Acquisition acq = reopen(served);
  require_complete(acq);
  load.threads = state.compute.current()->threads;
  const LoadPlan plan = plan_load(acq, load);
  if (plan.output_dtype == DType::F32 || plan.output_dtype == DType::F64)
    throw HttpError(409, "the frames are " + std::string(dtype_name(plan.output_dtype)) +
                             ": the page's WGSL kernels read u8, u16 and u32 counts; use the server's products");
  if (plan.output_bytes > kMaxBlockBytes)
    throw HttpError(409, "the decoded acquisition is " + std::to_string(plan.output_bytes) + " bytes, over the " +
                             std::to_string(kMaxBlockBytes) + " bytes a block may have: use the server's products");
  if (const auto rows = q.counts("rows")) {  // one band of the view's rows; the limit above is the whole view's
    const Box& v = plan.scan_region;
    const uint64_t view_rows = v.r1 - v.r0;
    if ((*rows)[0] >= (*rows)[1] || (*rows)[1] > view_rows)
      throw HttpError(400, "parameter 'rows': " + std::to_string((*rows)[0]) + "," + std::to_string((*rows)[1]) +
                               " is not a non-empty half-open range of the view's " + std::to_string(view_rows) + " scan rows");
    load.scan_region = Box{v.r0 + (*rows)[0], v.r0 + (*rows)[1], v.c0, v.c1};
  }
  const StemArray block = load_stem(acq, load);
  res.set_header("X-Block-View-Bytes", std::to_string(plan.output_bytes));
  std::string body(static_cast<size_t>((block.bytes + 3) / 4 * 4), '\0');
  if (block.bytes) std::memcpy(body.data(), block.data.get(), block.bytes);
  const auto& sh = block.shape;
  res.set_header("X-Block-Shape", std::to_string(sh[0]) + "," + std::to_string(sh[1]) + "," + std::to_string(sh[2]) + "," +
                                      std::to_string(sh[3]));
  res.set_header("X-Block-Dtype", std::string(dtype_name(block.dtype)));
  res.set_content(std::move(body), "application/octet-stream");
}

}  // namespace

void add_stem_routes(httplib::Server& svr, ServerState& state) {
  svr.Get("/api/acquisitions", guarded([&state](const httplib::Request&, httplib::Response& res) {
            nlohmann::json list = nlohmann::json::array();
            for (auto& a : state.acquisitions) list.push_back(summary_json(*a, reopen(*a)));
            send_json(res, {{"acquisitions", list}});
          }));
  svr.Get(R"(/api/acquisitions/([^/]+))", guarded([&state](const httplib::Request& req, httplib::Response& res) {
            ServedAcquisition& a = find_acquisition(state, req.matches[1]);
            send_json(res, summary_json(a, reopen(a)));
          }));
  svr.Get(R"(/api/acquisitions/([^/]+)/products/([^/]+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_product(state, req, res); }));
  svr.Get(R"(/api/acquisitions/([^/]+)/calibration)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_calibration(state, req, res); }));
  svr.Get(R"(/api/acquisitions/([^/]+)/block)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_block(state, req, res); }));
  svr.Get(R"(/api/acquisitions/([^/]+)/frame)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_frame(state, req, res); }));
  // The process's resident acquisitions (budget, copies with their size and where they live, the evictions), and
  // dropping them all.
  svr.Get("/api/stem/resident", guarded([](const httplib::Request&, httplib::Response& res) {
            send_json(res, ResidentStore::process().describe());
          }));
  svr.Delete("/api/stem/resident", guarded([](const httplib::Request&, httplib::Response& res) {
               ResidentStore::process().drop_all();
               send_json(res, ResidentStore::process().describe());
             }));
  add_stem_ssb_routes(svr, state);
  add_stem_movie_routes(svr, state);
  add_stem_chunk_routes(svr, state);
  add_stem_prepared_routes(svr, state);
  add_stem_event_routes(svr, state);
}

}  // namespace tmorph::server
