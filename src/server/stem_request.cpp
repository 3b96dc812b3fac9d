// The request pieces every 4D-STEM endpoint shares (stem_request.h).
#include "server/stem_request.h"

#include <filesystem>

#include "stem/inspect_document.h"

namespace tmorph::server {

ServedAcquisition& find_acquisition(ServerState& state, const std::string& id) {
  for (auto& a : state.acquisitions)
    if (a->id == id) return *a;
  throw HttpError(404, "no acquisition '" + id + "' (GET /api/acquisitions lists them)");
}

Acquisition reopen(const ServedAcquisition& a) { return open_acquisition(a.path); }

std::vector<uint64_t> unsigned_list(const std::string& text, size_t count, const char* name, const std::string& expected,
                                    const std::string& whole) {
  std::vector<uint64_t> out;
  size_t at = 0;
  while (out.size() < count) {
    const size_t comma = text.find(',', at);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    const std::string part = text.substr(at, end - at);
    const bool last = out.size() + 1 == count;
    if (part.empty() || part.size() > 15 || part.find_first_not_of("0123456789") != std::string::npos || last != (comma == std::string::npos))
      throw HttpError(400, std::string("parameter '") + name + "': expected " + expected + ", got '" + whole + "'");
    out.push_back(std::stoull(part));
    at = end + 1;
  }
  return out;
}

std::optional<std::array<uint64_t, 2>> pair_param(const httplib::Request& req, const char* name) {
  const auto text = text_param(req, name);
  if (!text) return std::nullopt;
  const auto v = unsigned_list(*text, 2, name, "two unsigned integers ROW,COL", *text);
  return std::array<uint64_t, 2>{v[0], v[1]};
}

std::optional<std::array<double, 2>> point_param(const httplib::Request& req, const char* name) {
  const auto text = text_param(req, name);
  if (!text) return std::nullopt;
  const size_t comma = text->find(',');
  if (comma == std::string::npos || text->find(',', comma + 1) != std::string::npos)
    throw HttpError(400, std::string("parameter '") + name + "': expected ROW,COL in detector pixels, got '" + *text + "'");
  return std::array<double, 2>{parse_double(text->substr(0, comma), name), parse_double(text->substr(comma + 1), name)};
}

std::optional<double> number_param(const httplib::Request& req, const char* name) {
  const auto text = text_param(req, name);
  return text ? std::optional<double>(parse_double(*text, name)) : std::nullopt;
}

nlohmann::json summary_json(const ServedAcquisition& a, const Acquisition& acq) {
  nlohmann::json j = inspect_document(acq, std::nullopt, "scan_shape");
  j["id"] = a.id;
  j["path"] = a.path;
  j["name"] = std::filesystem::path(acq.master).filename().string();
  return j;
}

void require_complete(const Acquisition& acq) {
  if (acq.complete()) return;
  std::string why;
  for (const auto& p : acq.problems) why += (why.empty() ? "" : "; ") + p;
  throw HttpError(409, "the acquisition is not complete (" + (why.empty() ? std::string("frames missing") : why) + ")");
}

std::string format_param(const httplib::Request& req) {
  const std::string format = text_param(req, "format").value_or("json");
  if (format != "json" && format != "npy") throw HttpError(400, "parameter 'format': expected json or npy, got '" + format + "'");
  return format;
}

void view_params(const httplib::Request& req, LoadRequest& load, bool region) {
  if (const auto bin = uint_param(req, "detector_bin")) {
    if (*bin == 0 || *bin > 1024) throw HttpError(400, "parameter 'detector_bin': expected 1 to 1024, got " + std::to_string(*bin));
    load.detector_bin = {*bin, *bin};
  }
  if (!region) return;
  const auto text = text_param(req, "scan_region");
  if (!text) return;
  const auto v = unsigned_list(*text, 4, "scan_region", "four unsigned integers R0,R1,C0,C1", *text);
  load.scan_region = Box{v[0], v[1], v[2], v[3]};
}

}  // namespace tmorph::server
