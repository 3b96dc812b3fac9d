// The request pieces every 4D-STEM endpoint shares (stem_request.h).
#include "server/stem_request.h"


#include <filesystem>

#include "formats/frame_parts.h"
#include "stem/inspect_document.h"
#include "stem/stored_chunks.h"

namespace tmorph::server {

ServedAcquisition& find_acquisition(ServerState& state, const std::string& id) {
  for (auto& a : state.acquisitions)
    if (a->id == id) return *a;
  throw HttpError(404, "no acquisition '" + id + "' (GET /api/acquisitions lists them)");
}

Acquisition reopen(const ServedAcquisition& a) { return open_acquisition(a.path); }

namespace {

std::string files_identity(const ServedAcquisition& a, const Acquisition& acq) {
  std::vector<std::string> files = {a.path, acq.master};
  for (const DataPart& p : acq.parts) files.push_back(p.file);
  return acquisition_signature(std::move(files));
}

}  // namespace

std::shared_ptr<const Acquisition> reopen_for_products(ServedAcquisition& a) {
  std::lock_guard<std::mutex> lock(a.opened_mutex);
  // The files' identity before opening (those the last opening named) must equal it after (those this one names):
  // nothing changed while opening, so the opened state is the files' state. The first opening is never kept.
  const std::string before = a.opened ? files_identity(a, *a.opened) : std::string();
  if (a.opened && before == a.opened_identity) return a.opened;
  auto acq = std::make_shared<const Acquisition>(open_acquisition(a.path));
  const std::string after = files_identity(a, *acq);
  a.opened = acq;
  a.opened_identity = acq->complete() && before == after ? after : std::string();
  return acq;
}

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

std::optional<std::array<uint64_t, 2>> pair_param(const DeclaredQuery& q, std::string_view name) {
  const auto v = q.counts(name);
  return v ? std::optional<std::array<uint64_t, 2>>({(*v)[0], (*v)[1]}) : std::nullopt;
}

std::optional<std::array<double, 2>> point_param(const DeclaredQuery& q, std::string_view name) {
  const auto v = q.numbers(name);
  return v ? std::optional<std::array<double, 2>>({(*v)[0], (*v)[1]}) : std::nullopt;
}

nlohmann::json summary_json(const ServedAcquisition& a, const Acquisition& acq) {
  nlohmann::json j = inspect_document(acq, std::nullopt, "scan_shape");
  j["id"] = a.id;
  j["path"] = a.path;
  j["name"] = std::filesystem::path(acq.master).filename().string();
  j["stored_chunks"] = serves_stored_chunks(acq);  // GET …/chunks serves its frames (the page decodes them)
  return j;
}

void require_complete(const Acquisition& acq) {
  if (acq.complete()) return;
  std::string why;
  for (const auto& p : acq.problems) why += (why.empty() ? "" : "; ") + p;
  throw HttpError(409, "the acquisition is not complete (" + (why.empty() ? std::string("frames missing") : why) + ")");
}

void require_region_written(const Acquisition& acq, const LoadRequest& load) {
  if (acq.complete()) return;
  if (acq.value_problems.empty() && acq.frames_present > 0) {
    const LoadPlan plan = plan_load(acq, load);
    const Box& s = plan.scan_region;
    if (s.r1 > s.r0 && s.c1 > s.c0 && (s.r1 - 1) * plan.scan_shape[1] + (s.c1 - 1) < acq.frames_readable_prefix()) return;
  }
  require_complete(acq);
}

std::string format_param(const DeclaredQuery& q) { return q.choice("format").value_or("json"); }

DiskRequest disk_params(const DeclaredQuery& q) {
  DiskRequest disk;
  disk.center = point_param(q, "center");
  disk.radius = q.number("radius");
  disk.radius_name = "radius";
  return disk;
}

void view_params(const DeclaredQuery& q, LoadRequest& load, bool region) {
  if (const auto bin = q.count("detector_bin")) load.detector_bin = {*bin, *bin};
  if (!region) return;
  if (const auto v = q.counts("scan_region")) load.scan_region = Box{(*v)[0], (*v)[1], (*v)[2], (*v)[3]};
}

std::shared_ptr<OperationProgress> track_load(ServerState& state, const DeclaredQuery& q, LoadRequest& load) {
  const auto id = q.text("progress_id");
  if (!id) return nullptr;
  auto p = state.progress.start(*id);
  load.cancel = &p->cancel_flag();
  load.progress = [p](uint64_t done, uint64_t total) { p->update("decoding frames", done, total); };
  return p;
}

}  // namespace tmorph::server
