// The prepared products of an acquisition (`tensormorph stem prepare`, stem/products/product_cache.h) as the page
// reads them: whether the server's product cache (serve --product-cache, else the user's default) answers the
// acquisition as it is now, with the entry's identity (key, build time) or why not (none, stale: the files changed
// since, another contract or load request, damaged), and each prepared product as stored — the arrays `stem bf
// --cache` answers with, byte for byte, nothing decoded and no pass placed. The face parses and prints; what the
// cache holds and when it answers is stem/'s.
#include <string>

#include "ops/placement_json.h"
#include "stem/products/product_cache.h"
#include "stem/products/product_run.h"
#include "stem/runs/request_params.h"
#include "tensormorph/error.h"

#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"

namespace tmorph::server {

namespace {

// The view's load request (scan_shape, scan_region, detector_bin), as the products endpoint reads it.
LoadRequest prepared_view(const DeclaredQuery& q) {
  LoadRequest load;
  load.scan_shape = pair_param(q, "scan_shape");
  view_params(q, load);
  return load;
}

// GET /api/acquisitions/{id}/prepared[?scan_shape=R,C][&scan_region=R0,R1,C0,C1][&detector_bin=N]: the cache's
// status for this acquisition and view (find_prepared's document) and the acquisition's id. Nothing is computed.
void get_prepared_status(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  for (const auto& [name, value] : req.params)
    if (name != "scan_shape" && name != "scan_region" && name != "detector_bin" && name != "token")
      throw HttpError(400, "parameter '" + name + "': the prepared status takes scan_shape, scan_region and detector_bin only");
  const DeclaredQuery q(req, product_params());
  const LoadRequest load = prepared_view(q);
  const std::shared_ptr<const Acquisition> acq = reopen_for_products(served);
  require_complete(*acq);
  nlohmann::json doc = find_prepared(state.product_cache, *acq, load).status;
  doc["acquisition"] = served.id;
  send_json(res, doc);
}

// GET /api/acquisitions/{id}/prepared/{kind}[?max=1][&of=KIND][&rotation_deg=&transpose=1][&scan_shape=…][&scan_region=…]
//     [&detector_bin=N][&format=json|npy]: a prepared product (bf, abf, adf, haadf, df, com, dpc, idpc, mean-dp, fft
// of one of them) from the cache entry, as `stem KIND --cache` answers it: the same values and report, with `cache`
// {hit, database, key, created_at, created, prepare_seconds} and an empty placement. 404 for a kind or detector the
// cache does not hold (…/products computes those); 409 with the reason when the cache does not answer this
// acquisition as it is now (no entry, stale, damaged).
void get_prepared_product(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const std::string kind_name = req.matches[2];
  const auto kind = product_kind_from_name(kind_name);
  if (!kind) throw HttpError(404, "no product '" + kind_name + "' (the cache holds bf, abf, adf, haadf, df, com, dpc, idpc, mean-dp and their fft)");
  const DeclaredQuery q(req, product_params());
  const std::string format = format_param(q);
  ProductSpec spec;
  spec.kind = *kind;
  spec.load = prepared_view(q);
  if (const auto of = q.choice("of")) spec.of = product_kind_from_name(*of);
  spec.max_pattern = q.on("max", false);
  spec.rotation = {q.number("rotation_deg"), q.on("transpose", false)};
  spec.disk = disk_params(q);
  spec.detector.inner_px = q.number("inner");
  spec.detector.outer_px = q.number("outer");
  spec.detector.inner_mrad = q.number("inner_mrad");
  spec.detector.outer_mrad = q.number("outer_mrad");
  if (q.counts("rect")) throw HttpError(404, "a rectangle detector is not prepared: GET …/products/mask computes it");
  spec.detector.kind = product_source(spec);
  check_product_request(spec, Face::Http);
  if (!product_served_by_prepared(spec))
    throw HttpError(404, "product " + kind_name + " with this disk or detector is not prepared: GET …/products/" + kind_name + " computes it");
  const std::shared_ptr<const Acquisition> opened = reopen_for_products(served);
  require_complete(*opened);
  PreparedLookup found = find_prepared(state.product_cache, *opened, spec.load);
  if (!found.products) throw HttpError(409, "not prepared: " + found.status.value("why", std::string("no entry")));
  ProductOutput out = compute_product(*opened, spec, found.products, []() -> const Planner& {
    throw Error(ErrorKind::Internal, "a prepared product asked for a pass");
  });
  nlohmann::json doc = std::move(out.report);
  const nlohmann::json& entry = found.status["entry"];
  doc["cache"] = {{"hit", true}, {"database", found.status["database"]}, {"key", entry["key"]}, {"created_at", entry["created_at"]},
                  {"created", entry["created"]}, {"prepare_seconds", entry["prepare_seconds"]}};
  doc["acquisition"] = served.id;
  doc["product"] = product_name(*kind);
  doc["placement"] = placements_json(out.placements);
  std::visit([&](const auto& values) { send_values(res, format, out.npy_descr, out.shape, values, std::move(doc)); }, out.values);
}

}  // namespace

void add_stem_prepared_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/prepared)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_prepared_status(state, req, res); }));
  svr.Get(R"(/api/acquisitions/([^/]+)/prepared/([^/]+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_prepared_product(state, req, res); }));
}

}  // namespace tmorph::server
