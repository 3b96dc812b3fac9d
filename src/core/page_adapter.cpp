#include "core/page_adapter.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/utc_time.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph {

namespace {

constexpr size_t kMaxText = 256;  // bytes of one text field: adapter descriptions are short
const char* const kFlags[] = {"available", "fallback", "software"};
const char* const kTexts[] = {"name", "vendor", "architecture", "device", "description", "reason"};

// The fields of a report, each of its type; `where` prefixes the error (the request or the file).
nlohmann::json checked(const nlohmann::json& r, const std::string& where, ErrorKind kind, bool with_time) {
  if (!r.is_object()) throw Error(kind, where + "expected a JSON object");
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : r.items()) {
    const bool flag = std::find(std::begin(kFlags), std::end(kFlags), key) != std::end(kFlags);
    const bool text = std::find(std::begin(kTexts), std::end(kTexts), key) != std::end(kTexts) ||
                      (with_time && key == "reported_at");
    if (!flag && !text)
      throw Error(kind, where + "field '" + key + "': unknown (expected available, fallback, software, name, vendor, "
                                  "architecture, device, description, reason)");
    if (flag && !value.is_boolean()) throw Error(kind, where + "field '" + key + "': expected true or false");
    if (text && (!value.is_string() || value.get_ref<const std::string&>().size() > kMaxText))
      throw Error(kind, where + "field '" + key + "': expected a string of at most " + std::to_string(kMaxText) + " bytes");
    out[key] = value;
  }
  if (!out.contains("available")) throw Error(kind, where + "field 'available': missing (true or false)");
  if (with_time && !out.contains("reported_at")) throw Error(kind, where + "field 'reported_at': missing");
  return out;
}

}  // namespace

std::string page_adapter_path() { return cache_dir() + "/webgpu-adapter.json"; }

nlohmann::json validated_page_adapter(const nlohmann::json& report) {
  return checked(report, "", ErrorKind::InvalidArgument, false);
}

nlohmann::json save_page_adapter(const nlohmann::json& validated) {
  nlohmann::json record = validated;
  record["reported_at"] = utc_now_iso8601();
  const std::string path = page_adapter_path(), tmp = path + ".tmp";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, tmp + ": cannot write the WebGPU adapter record");
    out << record.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorKind::Io, path + ": cannot replace the WebGPU adapter record: " + ec.message());
  return record;
}

std::optional<nlohmann::json> load_page_adapter() {
  const std::string path = page_adapter_path();
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().size() > 64 * 1024)
    throw Error(ErrorKind::BadInput, path + ": " + std::to_string(text.str().size()) + " bytes, expected a record of at most 64 KiB");
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) throw Error(ErrorKind::BadInput, path + ": not JSON (expected the WebGPU adapter record)");
  return checked(doc, path + ": ", ErrorKind::BadInput, true);
}

std::string page_adapter_text(const std::optional<nlohmann::json>& report) {
  if (!report) return "none seen (no page has reported an adapter: open the viewer, tensormorph serve)";
  const nlohmann::json& r = *report;
  const std::string when = ", reported " + r.value("reported_at", std::string("?"));
  if (!r.value("available", false))
    return "none available in the page (" + r.value("reason", std::string("no reason given")) + ")" + when;
  std::string name = r.value("name", std::string());
  if (name.empty()) name = "unnamed adapter";
  return name + (r.value("software", false) ? " (software adapter)" : "") + when;
}

}  // namespace tmorph
