// Static files of the viewer (web/dist) and the fallback page. A request path is resolved inside the
// web root only: segments "..", "." and hidden names are refused before the file system is asked, and
// the resolved file (symlinks followed) must still lie under the canonical root.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "server/http_util.h"
#include "server/routes.h"

namespace tmorph::server {

namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kMaxStaticBytes = uintmax_t{64} << 20;

constexpr const char* kBuiltinPage = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tensormorph</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem}code{background:#eee;padding:0 .2em}</style>
</head><body>
<h1>Tensormorph</h1>
<p>The viewer's web app is not built (no <code>web/dist</code> beside the binary or in the source tree).
The JSON API is served; see <code>docs/api.md</code>.</p>
<ul>
<li><code>GET /api/health</code></li>
<li><code>GET /api/checkpoints</code></li>
<li><code>GET /api/tensors?q=&amp;sort=name|size|dtype&amp;order=asc|desc&amp;limit=&amp;offset=</code></li>
<li><code>GET /api/tensors/{checkpoint}/{tensor}</code></li>
<li><code>GET /api/tiles/{checkpoint}/{tensor}?level=&amp;x=&amp;y=&amp;slice=&amp;format=binary|json</code></li>
<li><code>GET /api/render/{checkpoint}/{tensor}.png?level=&amp;x=&amp;y=&amp;slice=&amp;stat=&amp;transform=&amp;colormap=&amp;limits=</code></li>
<li><code>GET /api/compute</code>, <code>PUT /api/compute</code></li>
</ul>
<p><a href="/api/checkpoints">/api/checkpoints</a> &middot; <a href="/api/tensors?limit=50">/api/tensors</a></p>
</body></html>
)html";

std::string mime_type(const fs::path& p) {
  const std::string ext = p.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json" || ext == ".map") return "application/json";
  if (ext == ".wasm") return "application/wasm";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".ico") return "image/x-icon";
  if (ext == ".wgsl" || ext == ".txt") return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// The path relative to the root, or empty when it must be refused (404) without touching the disk.
std::string safe_relative(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() > 1024) return {};
  std::string rel = path.substr(1);
  if (rel.empty() || rel.back() == '/') rel += "index.html";
  size_t begin = 0;
  while (begin <= rel.size()) {
    size_t end = rel.find('/', begin);
    if (end == std::string::npos) end = rel.size();
    const std::string seg = rel.substr(begin, end - begin);
    if (seg.empty() || seg[0] == '.') return {};  // "", ".", "..", hidden files
    for (char ch : seg)
      if (static_cast<unsigned char>(ch) < 0x20 || ch == '\\' || ch == ':' || ch == 0x7f) return {};
    begin = end + 1;
  }
  return rel;
}

void serve_static(const ServerState& state, const httplib::Request& req, httplib::Response& res) {
  if (state.web_root.empty()) {
    if (req.path != "/" && req.path != "/index.html") throw HttpError(404, "not found");
    res.set_content(kBuiltinPage, "text/html; charset=utf-8");
    return;
  }
  const std::string rel = safe_relative(req.path);
  if (rel.empty()) throw HttpError(404, "not found");
  std::error_code ec;
  const fs::path file = fs::canonical(fs::path(state.web_root) / rel, ec);
  const std::string resolved = file.string();
  if (ec || resolved.size() <= state.web_root.size() || resolved.compare(0, state.web_root.size(), state.web_root) != 0 ||
      resolved[state.web_root.size()] != '/' || !fs::is_regular_file(file, ec))
    throw HttpError(404, "not found");
  const uintmax_t size = fs::file_size(file, ec);
  if (ec || size > kMaxStaticBytes) throw HttpError(404, "not found");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw HttpError(404, "not found");
  res.set_content(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), mime_type(file));
}

}  // namespace

void add_static_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api(/.*)?)", guarded([](const httplib::Request& req, httplib::Response&) {
            throw HttpError(404, "no API endpoint " + req.path + " (see docs/api.md)");
          }));
  svr.Get(R"(/.*)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { serve_static(state, req, res); }));
}

}  // namespace tmorph::server
