#include "stem/acquisition.h"

#include <algorithm>
#include <cmath>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

bool Acquisition::complete() const {
  if (!problems.empty()) return false;
  for (const auto& p : parts)
    if (!p.present) return false;
  return !frames_expected || *frames_expected == frames_present;
}

uint64_t Acquisition::frames_readable_prefix() const {
  uint64_t n = 0;
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& p : parts)
      if (p.present && p.frames > 0 && p.first_frame <= n && p.first_frame + p.frames > n) n = p.first_frame + p.frames, grew = true;
  }
  return std::min(n, frames_total());
}

// Names and paths come from the files (external link targets, link names): bytes, not always UTF-8.
nlohmann::json Acquisition::readiness_json() const {
  nlohmann::json parts_json = nlohmann::json::array();
  for (const auto& p : parts) {
    nlohmann::json j = {{"link", escape_invalid_utf8(p.link)}, {"file", escape_invalid_utf8(p.file)}, {"dataset", escape_invalid_utf8(p.dataset)}, {"present", p.present}};
    if (p.present) {
      j["frames"] = p.frames;
      j["first_frame"] = p.first_frame;
      j["codec"] = chunk_codec_name(p.codec);
      if (p.image_nr_low) j["image_nr_low"] = *p.image_nr_low;
      if (p.image_nr_high) j["image_nr_high"] = *p.image_nr_high;
    } else {
      j["problem"] = escape_invalid_utf8(p.problem);
    }
    parts_json.push_back(j);
  }
  nlohmann::json problems_json = nlohmann::json::array();
  for (const auto& p : problems) problems_json.push_back(escape_invalid_utf8(p));
  nlohmann::json out = {{"status", complete() ? "complete" : "incomplete"},
                        {"frames_present", frames_present},
                        {"frames_expected", frames_expected ? nlohmann::json(*frames_expected) : nlohmann::json()},
                        {"problems", problems_json},
                        {"data_files", parts_json}};
  return out;
}

nlohmann::json Acquisition::problems_report() const {
  if (problems.empty()) return nullptr;
  nlohmann::json all = nlohmann::json::array(), changing = nlohmann::json::array();
  for (const auto& p : problems) all.push_back(escape_invalid_utf8(p));
  for (const auto& p : value_problems) changing.push_back(escape_invalid_utf8(p));
  return {{"status", complete() ? "complete" : "incomplete"}, {"problems", all}, {"changing_values", changing}};
}

void refuse_if_values_changed(const Acquisition& acq, const std::string& what) {
  if (acq.value_problems.empty()) return;
  std::string list;
  for (const auto& p : acq.value_problems) list += (list.empty() ? "" : "; ") + escape_invalid_utf8(p);
  throw Error(ErrorKind::Incomplete, what + " was computed from an acquisition whose problems change its values (listed in its "
                                            "report under acquisition_problems): " + list);
}

std::array<uint64_t, 2> resolve_scan_shape(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given) {
  const uint64_t total = acq.frames_total();
  if (given) {
    const auto [r, c] = *given;
    if (r == 0 || c == 0 || r > total || c > total || r * c != total)
      throw Error(ErrorKind::InvalidArgument, "--scan-shape " + std::to_string(r) + "," + std::to_string(c) + " does not cover the " +
                                                  std::to_string(total) + " frames of " + acq.master);
    return *given;
  }
  if (acq.scan_shape_recorded) {
    const auto [r, c] = *acq.scan_shape_recorded;
    if (r > 0 && c > 0 && r <= total && r * c == total) return *acq.scan_shape_recorded;
  }
  const auto side = static_cast<uint64_t>(std::llround(std::sqrt(static_cast<double>(total))));
  if (total > 0 && side * side == total) return {side, side};
  throw Error(ErrorKind::InvalidArgument, acq.master + ": " + std::to_string(total) +
                                              " frames do not form a square scan and the file does not give one: pass --scan-shape ROWS,COLS");
}

std::string scan_shape_source(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given,
                              const std::array<uint64_t, 2>& resolved, const std::string& given_name) {
  if (given) return given_name;
  if (acq.scan_shape_recorded && *acq.scan_shape_recorded == resolved) return acq.scan_shape_path;
  return "square frame count";
}

}  // namespace tmorph
