#include "remote/header_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "remote/mirror_file.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::remote {

namespace {

namespace fs = std::filesystem;

constexpr const char* kRecordSuffix = ".tensormorph-headers.json";

std::string record_path(const std::string& local_path) { return local_path + kRecordSuffix; }

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A numeric setting in [lo, hi], or `fallback` when unset (Settings::number refuses any other value).
double setting(const char* key, double lo, double hi, double fallback) {
  return Settings::load().number(key, lo, hi).value_or(fallback);
}

std::optional<HeaderRecord> read_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != 1) return std::nullopt;
  try {
    HeaderRecord r;
    r.fetched_at_ms = j.at("fetched_at_ms").get<int64_t>();
    r.header_bytes = j.at("header_bytes").get<uint64_t>();
    for (const auto& f : j.at("files")) {
      HeaderRecord::File file;
      file.given = f.at("given").get<std::string>(), file.path = f.at("path").get<std::string>();
      file.id.url = f.at("url").get<std::string>(), file.id.size = f.at("size").get<uint64_t>();
      file.id.etag = f.at("etag").get<std::string>(), file.id.last_modified = f.at("last_modified").get<std::string>();
      file.id.last_modified_s = f.at("last_modified_s").get<int64_t>();
      r.files.push_back(std::move(file));
    }
    return r;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a damaged record is only a cache miss
  }
}

uint64_t allocated_bytes(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

// True when no process holds the folder's stand-in lock (remote/mirror_file.h's MirrorLock); the lock is not kept.
bool folder_free(const fs::path& folder) {
  const std::string lock = (folder / ".tensormorph-remote.lock").string();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return true;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases it
  return free;
}

std::mutex g_open_mutex;
std::multiset<std::string>& open_here() {
  static std::multiset<std::string> open;
  return open;
}

}  // namespace

void mark_open(const std::string& local_path, bool open) {
  std::lock_guard<std::mutex> guard(g_open_mutex);
  if (open) open_here().insert(record_path(local_path));
  else if (auto it = open_here().find(record_path(local_path)); it != open_here().end()) open_here().erase(it);
}

std::optional<HeaderRecord> fresh_header_record(const std::string& local_path) {
  const double max_age = setting("remote.header_max_age_s", 0, 31536000, 600);
  if (max_age <= 0) return std::nullopt;
  auto r = read_record(record_path(local_path));
  const int64_t now = now_ms();
  if (!r || r->files.empty() || static_cast<double>(now - r->fetched_at_ms) > max_age * 1000 || now < r->fetched_at_ms) return std::nullopt;
  for (const auto& f : r->files) {
    std::error_code ec;
    if (!fs::is_regular_file(f.path, ec) || fs::file_size(f.path, ec) != f.id.size) return std::nullopt;
  }
  return r;
}

void write_header_record(const std::string& local_path, const HeaderRecord& record) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : record.files)
    files.push_back({{"given", f.given}, {"path", f.path}, {"url", f.id.url}, {"size", f.id.size}, {"etag", f.id.etag},
                     {"last_modified", f.id.last_modified}, {"last_modified_s", f.id.last_modified_s}});
  const nlohmann::json j = {{"version", 1}, {"fetched_at_ms", record.fetched_at_ms ? record.fetched_at_ms : now_ms()},
                            {"header_bytes", record.header_bytes}, {"files", files}};
  const std::string text = j.dump(1);
  write_mirror_sidecar(record_path(local_path), std::vector<uint8_t>(text.begin(), text.end()));
}

void drop_header_record(const std::string& local_path) {
  std::error_code ec;
  fs::remove(record_path(local_path), ec);
}

void prune_header_cache() {
  const double bound = setting("remote.header_cache_bytes", 1 << 20, 1e15, 256.0 * (1 << 20));
  const fs::path root = fs::path(cache_dir()) / "remote";
  std::error_code ec;
  uint64_t total = 0;
  std::vector<std::pair<int64_t, fs::path>> records;  // (fetched_at_ms, record path)
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    total += allocated_bytes(it->path());
    const std::string name = it->path().filename().string();
    if (name.size() > std::string(kRecordSuffix).size() && name.ends_with(kRecordSuffix))
      if (auto r = read_record(it->path().string())) records.emplace_back(r->fetched_at_ms, it->path());
  }
  if (static_cast<double>(total) <= bound) return;
  std::sort(records.begin(), records.end());
  for (const auto& [when, path] : records) {
    if (static_cast<double>(total) <= bound) break;
    {
      std::lock_guard<std::mutex> guard(g_open_mutex);
      if (open_here().count(path.string())) continue;
    }
    const fs::path folder = path.parent_path();
    if (!MirrorLock::held_here(folder.string()) && !folder_free(folder)) continue;
    const auto r = read_record(path.string());
    if (!r) continue;
    for (const auto& f : r->files) {
      total -= std::min(total, allocated_bytes(f.path));
      fs::remove(f.path, ec);
    }
    total -= std::min(total, allocated_bytes(path));
    fs::remove(path, ec);
  }
}

}  // namespace tmorph::remote
