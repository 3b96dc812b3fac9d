// GET /api/acquisitions/{id}/chunks?start=F&count=N: the stored chunks of frames [F, F + N), still compressed, for a
// client that decodes them itself (the page's WGSL decoder). The face parses, calls stem/stored_chunks.h and prints.
//
// Response (application/octet-stream): a JSON manifest of X-Chunks-Manifest-Bytes bytes (UTF-8, padded with spaces to
// a multiple of 4), then the chunks' data: each chunk at manifest bytes + its `offset` (a multiple of 4), `bytes` long.
// Manifest: {"acquisition", "start", "count", "frames_total", "dtype" (u8|u16|u32), "element_size" (bytes),
// "frame_shape" [rows, cols], "frame_bytes", "sentinel" (the value the products zero), "bad_pixels" (row-major pixels
// the products zero), "files" [data file names], "data_bytes", "chunks": [{"frame", "offset", "bytes", "filter"
// (bitshuffle_lz4|none), "block_bytes" (bitshuffle: the block size in bytes from the chunk's header; 0 for none),
// "file" (index into files)}]}. 400 for a window outside the acquisition or over kMaxChunkBytes of chunks; 409 for
// frames stored any other way (the page then fetches …/block), for float frames and for an incomplete acquisition.
#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"
#include "stem/runs/request_params.h"
#include "stem/stored_chunks.h"

namespace tmorph::server {

namespace {

// The most chunk bytes one answer carries (the page asks for windows well below it).
constexpr uint64_t kMaxChunkBytes = uint64_t{256} << 20;

void get_chunks(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, chunks_params());
  const auto start = q.count("start"), count = q.count("count");
  if (!start || !count) throw HttpError(400, "parameters 'start' and 'count' (the frame window) are required");
  const Acquisition acq = reopen(served);
  require_complete(acq);
  StoredChunks stored = read_stored_chunks(acq, *start, *count, kMaxChunkBytes);
  nlohmann::json chunks = nlohmann::json::array();
  for (const StoredChunk& c : stored.entries)
    chunks.push_back({{"frame", c.frame}, {"offset", c.offset}, {"bytes", c.bytes}, {"filter", stored_filter_name(c.filter)},
                      {"block_bytes", c.block_bytes}, {"file", c.part}});
  const nlohmann::json manifest = {{"acquisition", served.id},
                                   {"start", stored.start},
                                   {"count", stored.count},
                                   {"frames_total", acq.frames_total()},
                                   {"dtype", dtype_name(stored.dtype)},
                                   {"element_size", stored.element_size},
                                   {"frame_shape", {stored.frame_rows, stored.frame_cols}},
                                   {"frame_bytes", stored.frame_bytes},
                                   {"sentinel", stored.sentinel},
                                   {"bad_pixels", stored.bad_pixels},
                                   {"files", stored.files},
                                   {"data_bytes", stored.body.size()},
                                   {"chunks", std::move(chunks)}};
  std::string body = manifest.dump();
  body.resize((body.size() + 3) / 4 * 4, ' ');
  res.set_header("X-Chunks-Manifest-Bytes", std::to_string(body.size()));
  body += stored.body;
  res.set_content(std::move(body), "application/octet-stream");
}

}  // namespace

void add_stem_chunk_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/chunks)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_chunks(state, req, res); }));
}

}  // namespace tmorph::server
