#include "tensormorph/settings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "core/json_file.h"
#include "tensormorph/error.h"

namespace tmorph {

const std::vector<SettingKey>& known_settings() {
  static const std::vector<SettingKey> keys = {
      {"compute.prefer", "backends to prefer when they can serve an op, comma-separated, in order"},
      {"compute.never", "backends never to use, comma-separated"},
      {"compute.plugin_dir", "directory searched for backend plugins (TENSORMORPH_PLUGIN_DIR wins)"},
      {"compute.threads", "host threads for CPU kernels (default: all cores)"},
      {"compute.memory_budget", "bytes a single op may hold in memory (default: half of RAM)"},
      {"compute.split", "auto, on or off: whether one op may be split over several backends (default auto: large inputs, "
                        "hardware devices only; docs/backends.md)"},
      {"stem.resident_memory", "bytes of 4D-STEM acquisitions kept resident between requests, 0 = off "
                               "(default: a quarter of RAM in the server and Python, 0 in the CLI)"},
      {"stem.resident_device_memory", "bytes of resident copies kept on each device that computes from its own memory "
                                      "(a GPU), least recently used evicted first, 0 = as stem.resident_memory (default 0)"},
      {"remote.hf_endpoint", "where hf://ORG/NAME[@REV]/FILE paths resolve, as ENDPOINT/ORG/NAME/resolve/REV/FILE "
                             "($HF_ENDPOINT wins; default https://huggingface.co)"},
      {"remote.s3_endpoint", "where s3://BUCKET/KEY paths resolve, as ENDPOINT/BUCKET/KEY ($AWS_ENDPOINT_URL_S3, then "
                             "$AWS_ENDPOINT_URL win; default https://s3.REGION.amazonaws.com)"},
      {"remote.s3_region", "the region s3:// requests are signed for ($AWS_REGION, then $AWS_DEFAULT_REGION win; default us-east-1)"},
      {"remote.header_max_age_s", "seconds a remote checkpoint's cached headers are reused without asking the server "
                                  "(default 600; 0: always ask; data read later is still checked against them)"},
      {"remote.header_cache_bytes", "bytes the remote header cache (cache folder/remote) may hold before the least recently "
                                    "fetched checkpoints are removed (default 256 MiB)"},
      {"remote.attempts", "tries of one ranged request of a remote checkpoint before the command fails (default 6)"},
      {"remote.stall_timeout_s", "seconds a remote response may deliver nothing before it is retried (default 30)"},
      {"remote.in_flight", "ranged requests of a remote checkpoint in flight at once (default 8)"},
  };
  return keys;
}

std::string config_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tensormorph";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.config/tensormorph";
  return ".tensormorph";
}

std::string cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/tensormorph";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/tensormorph";
  return "/tmp/tensormorph";
}

Settings Settings::load(const std::string& path) {
  Settings s;
  s.path_ = path.empty() ? config_dir() + "/settings.json" : path;
  const auto read = read_json_file(s.path_);
  if (!read) return s;  // no settings yet
  const nlohmann::json& doc = *read;
  if (!doc.is_object())
    throw Error(ErrorKind::BadInput, s.path_ + ": expected a JSON object of setting keys");
  for (const auto& [key, value] : doc.items()) {
    if (!value.is_string())
      throw Error(ErrorKind::BadInput, s.path_ + ": setting '" + key + "' must be a string");
    s.values_[key] = value.get<std::string>();
  }
  return s;
}

void Settings::save() const {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [k, v] : values_) doc[k] = v;
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw Error(ErrorKind::Io, tmp + ": cannot write settings");
    out << doc.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, path_, ec);
  if (ec) throw Error(ErrorKind::Io, path_ + ": cannot replace settings: " + ec.message());
}

std::optional<std::string> Settings::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<double> Settings::number(const std::string& key, double lo, double hi) const {
  const auto v = get(key);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !(d >= lo && d <= hi))
    throw Error(ErrorKind::InvalidArgument, "setting " + key + ": expected a number from " + std::to_string(static_cast<long long>(lo)) +
                                                " to " + std::to_string(static_cast<long long>(hi)) + ", got '" + *v + "'");
  return d;
}

void Settings::set(const std::string& key, const std::string& value) {
  bool known = false;
  std::string list;
  for (const auto& k : known_settings()) {
    known = known || key == k.key;
    list += std::string(list.empty() ? "" : ", ") + k.key;
  }
  if (!known) throw Error(ErrorKind::InvalidArgument, "unknown setting '" + key + "' (known: " + list + ")");
  if (key == "compute.threads") parse_thread_count(value, "setting compute.threads");
  if (key == "compute.memory_budget") parse_memory_budget(value, "setting compute.memory_budget");
  if (key == "compute.split" && value != "auto" && value != "on" && value != "off")
    throw Error(ErrorKind::InvalidArgument, "setting compute.split: expected auto, on or off, got '" + value + "'");
  if (key == "stem.resident_memory") parse_bytes(value, "setting stem.resident_memory");
  if (key == "stem.resident_device_memory") parse_bytes(value, "setting stem.resident_device_memory");
  values_[key] = value;
}

bool Settings::unset(const std::string& key) { return values_.erase(key) > 0; }

unsigned parse_thread_count(const std::string& text, const std::string& what) {
  const bool digits = !text.empty() && text.size() <= 4 && text.find_first_not_of("0123456789") == std::string::npos;
  const unsigned long t = digits ? std::stoul(text) : 0;
  if (t == 0 || t > kMaxThreads)
    throw Error(ErrorKind::InvalidArgument, what + " must be an integer 1.." + std::to_string(kMaxThreads) + ", got '" + text + "'");
  return static_cast<unsigned>(t);
}

uint64_t parse_memory_budget(const std::string& text, const std::string& what) {
  const uint64_t bytes = parse_bytes(text, what);
  if (bytes == 0) throw Error(ErrorKind::InvalidArgument, what + " must be more than 0 bytes, got '" + text + "'");
  return bytes;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::stringstream in(text);
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

}  // namespace tmorph
