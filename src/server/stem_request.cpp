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

std::optional<std::array<uint64_t, 2>> pair_param(const httplib::Request& req, const char* name) {
  const auto text = text_param(req, name);
  if (!text) return std::nullopt;
  const size_t comma = text->find(',');
  if (comma == std::string::npos) throw HttpError(400, std::string("parameter '") + name + "': expected ROW,COL, got '" + *text + "'");
  std::array<uint64_t, 2> out{};
  for (int i = 0; i < 2; ++i) {
    const std::string part = i == 0 ? text->substr(0, comma) : text->substr(comma + 1);
    if (part.empty() || part.size() > 15 || part.find_first_not_of("0123456789") != std::string::npos)
      throw HttpError(400, std::string("parameter '") + name + "': expected two unsigned integers ROW,COL, got '" + *text + "'");
    out[i] = std::stoull(part);
  }
  return out;
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

}  // namespace tmorph::server
