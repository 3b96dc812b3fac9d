// GET /api/progress/{id}: where a long request named with progress_id is ({id, seen, stage, done, total, seconds,
// finished, outcome, cancel_requested}; seen false for an id not seen here, or long dropped). DELETE /api/progress/{id}:
// cancels it, or records the cancellation of a request not arrived yet; answers the entry (operation_progress.h).
#include "server/http_util.h"
#include "server/routes.h"

namespace tmorph::server {

void add_progress_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/progress/([^/]+))", guarded([&state](const httplib::Request& req, httplib::Response& res) {
            const auto p = state.progress.find(req.matches[1]);
            if (p) return send_json(res, p->json());
            // Named by the page but not seen here (still on its way, or dropped long ago): said, not an error, so a
            // page polling a request in flight does not log failures.
            send_json(res, {{"id", std::string(req.matches[1])}, {"seen", false}, {"stage", "not seen by the server"}, {"done", 0},
                            {"total", 0}, {"seconds", 0}, {"finished", false}, {"outcome", nullptr}, {"cancel_requested", false}});
          }));
  svr.Delete(R"(/api/progress/([^/]+))", guarded([&state](const httplib::Request& req, httplib::Response& res) {
               send_json(res, state.progress.cancel(req.matches[1])->json());
             }));
}

}  // namespace tmorph::server
