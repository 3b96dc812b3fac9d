#include "stem/products/product_cache.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/json_number.h"
#include "core/sqlite_db.h"
#include "ops/placement_json.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph {

namespace {

// Bump when a prepared product's definition or storage changes: older entries are then ignored.
constexpr int kContractVersion = 1;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS prepared(
  key TEXT PRIMARY KEY, report TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS arrays(
  key TEXT NOT NULL REFERENCES prepared(key) ON DELETE CASCADE, name TEXT NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY(key, name)) WITHOUT ROWID;
)sql";

nlohmann::json box_json(const std::optional<Box>& b) {
  if (!b) return nullptr;
  return {b->r0, b->r1, b->c0, b->c1};
}

// Unix seconds as UTC ISO 8601 ("2026-12-07T21:50:03Z").
std::string prepared_utc_text(int64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// Why an entry of the same master file under `theirs` does not answer the request keyed `ours` (both keys as JSON).
std::string prepared_mismatch_why(const nlohmann::json& ours, const nlohmann::json& theirs) {
  if (theirs.value("contract", 0) != ours.value("contract", 0))
    return "prepared under product contract " + theirs.value("contract", nlohmann::json(0)).dump() + ", this build reads contract " +
           ours.value("contract", nlohmann::json(0)).dump() + ": prepare it again";
  if (theirs.value("source", std::string()) != ours.value("source", std::string()))
    return "stale: the acquisition's files changed after it was prepared (source signature " + theirs.value("source", std::string()) +
           " then, " + ours.value("source", std::string()) + " now: a file's size, modification time or first bytes differ); prepare it again";
  std::string fields;
  for (const auto& [name, value] : ours.items())
    if (theirs.value(name, nlohmann::json()) != value) fields += (fields.empty() ? "" : ", ") + name + " " + theirs.value(name, nlohmann::json()).dump();
  return "prepared for another load request (" + fields + ")";
}

template <class T>
void put(SqliteStmt& ins, const std::string& key, const std::string& name, const std::vector<T>& v) {
  ins.bind(1, key).bind(2, name).bind_blob(3, v.data(), v.size() * sizeof(T)).run();
}

}  // namespace

bool served_by_prepared(ProductKind kind, const DiskRequest& disk, const DetectorRequest& d) {
  if (disk.center || disk.radius || d.inner_px || d.outer_px || d.inner_mrad || d.outer_mrad || !d.mask_file.empty() || d.rect) return false;
  return cacheable(kind);
}

PreparedImage prepared_image(const PreparedProducts& p, ProductKind kind, const Acquisition& acq, const LoadRequest& load,
                             const Override& semiangle_mrad, const Override& mrad_per_px) {
  const auto radii = preset_radii(kind, p.disk.radius);
  if (!radii) throw Error(ErrorKind::InvalidArgument, std::string("prepared products: ") + product_name(kind) + " is not a preset");
  PreparedImage out;
  out.index = static_cast<size_t>(std::find_if(std::begin(kPreparedPresets), std::end(kPreparedPresets),
                                               [&](const char* n) { return std::string(n) == product_name(kind); }) -
                                  std::begin(kPreparedPresets));
  out.disk = {p.disk, "detected (prepared)", true};
  const Sourced angle =
      detector_angle_per_pixel(acq, load, mrad_per_px, convergence_semiangle_mrad(acq, semiangle_mrad), p.disk.radius);
  out.detector = annulus_json(radii->first, radii->second, "pixels", p.detectors.at(out.index)["pixels"].get<uint64_t>(), angle);
  out.detector["name"] = product_name(kind);
  return out;
}

std::string product_cache_key(const Acquisition& acq, const LoadRequest& r) {
  const nlohmann::json k = {{"contract", kContractVersion},
                            {"source", acq.signature},
                            {"scan_shape", r.scan_shape ? nlohmann::json(*r.scan_shape) : nlohmann::json(nullptr)},
                            {"scan_region", box_json(r.scan_region)},
                            {"detector_region", box_json(r.detector_region)},
                            {"scan_bin", r.scan_bin},
                            {"detector_bin", r.detector_bin},
                            {"mask_bad_pixels", r.mask_bad_pixels}};
  return k.dump();
}

std::string default_product_cache_path() { return cache_dir() + "/stem/products.sqlite"; }

PreparedProducts prepare_products(const Acquisition& acq, const LoadRequest& load, const Planner& planner) {
  const auto t0 = std::chrono::steady_clock::now();
  if (acq.dtype == DType::F32 || acq.dtype == DType::F64)
    throw Error(ErrorKind::Unavailable, acq.master + ": stem prepare is not implemented for " + std::string(dtype_name(acq.dtype)) +
                                            " frames (the cache stores integer sums); products of float frames are computed each time");
  PreparedProducts p;
  ProductRequest pattern;
  pattern.load = load;
  pattern.frame_sums = false, pattern.pattern = true;
  const ProductResult pr = compute_products(acq, pattern, planner);
  p.disk = detect_bright_field_disk(mean_pattern(pr), pr.frame_shape[0], pr.frame_shape[1]);

  ProductRequest sums;
  sums.load = load;
  sums.com = true;
  for (const char* name : kPreparedPresets) {
    const auto radii = preset_radii(name, p.disk.radius);
    auto pixels = annulus_pixels(pr.frame_shape[0], pr.frame_shape[1], p.disk.row, p.disk.col, radii->first, radii->second);
    p.detectors.push_back({{"name", name}, {"inner_px", radii->first},
                           {"outer_px", json_number(radii->second)},
                           {"pixels", pixels.size()}});
    sums.detectors.push_back(std::move(pixels));
  }
  p.sums = compute_products(acq, sums, planner);
  p.sums.pattern_sum = pr.pattern_sum;
  p.sums.pattern_max = pr.pattern_max;
  p.sums.placements.insert(p.sums.placements.begin(), pr.placements.begin(), pr.placements.end());
  p.prepare_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

ProductCache::ProductCache(const std::string& path) : path_(path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  db_ = std::make_unique<SqliteDb>(path, SqliteDb::Mode::ReadWriteCreate);
  db_->exec("PRAGMA foreign_keys = ON");
  db_->exec(kSchema);
}

ProductCache::~ProductCache() = default;

std::optional<PreparedProducts> ProductCache::load(const std::string& key) const {
  SqliteStmt q(*db_, "SELECT report FROM prepared WHERE key = ?");
  q.bind(1, key);
  if (!q.step()) return std::nullopt;
  const auto bad = [&](const std::string& what) {
    return Error(ErrorKind::BadInput, path_ + ": prepared products are damaged (" + what + "); delete the file to rebuild it");
  };
  const nlohmann::json r = nlohmann::json::parse(q.text(0), nullptr, false);
  if (r.is_discarded() || !r.contains("scan_shape") || !r.contains("frame_shape") || !r.contains("disk")) throw bad("report");
  PreparedProducts p;
  ProductResult& s = p.sums;
  try {  // a report of the wrong shape is a damaged cache, never an internal error
    s.scan_shape = r.at("scan_shape").get<std::array<uint64_t, 2>>();
    s.frame_shape = r.at("frame_shape").get<std::array<uint64_t, 2>>();
    s.positions = r.at("positions").get<uint64_t>();
    s.evaluated_as = r.at("evaluated_as").get<std::vector<std::string>>();
    s.load_provenance = r.at("provenance");
    s.seconds = r.at("seconds").get<double>();
    s.decoded_bytes = r.at("decoded_bytes").get<uint64_t>();
    p.disk.row = r.at("disk").at("row"), p.disk.col = r.at("disk").at("col"), p.disk.radius = r.at("disk").at("radius");
    p.disk.area = r.at("disk").at("area"), p.disk.threshold = r.at("disk").at("threshold");
    p.detectors = r.at("detectors");
    p.prepare_seconds = r.at("prepare_seconds").get<double>();
    if (!p.detectors.is_array() || p.detectors.size() != std::size(kPreparedPresets) ||
        s.evaluated_as.size() != std::size(kPreparedPresets))
      throw bad("detectors: expected one per preset");
    for (const auto& d : p.detectors)
      if (!d.is_object() || !d.contains("pixels") || !d["pixels"].is_number_unsigned()) throw bad("detectors: pixels");
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("report: ") + e.what());
  }
  const uint64_t positions = s.scan_shape[0] * s.scan_shape[1], pixels = s.frame_shape[0] * s.frame_shape[1];
  SqliteStmt a(*db_, "SELECT name, data FROM arrays WHERE key = ?");
  a.bind(1, key);
  std::map<std::string, std::vector<uint8_t>> arrays;
  while (a.step()) arrays[a.text(0)] = a.blob(1);
  const auto take = [&](const std::string& name, auto& out, uint64_t count) {
    using T = typename std::decay_t<decltype(out)>::value_type;
    const auto it = arrays.find(name);
    if (it == arrays.end() || it->second.size() != count * sizeof(T))
      throw bad(name + ": expected " + std::to_string(count * sizeof(T)) + " bytes");
    out.resize(count);
    std::memcpy(out.data(), it->second.data(), it->second.size());
  };
  take("totals", s.totals, positions);
  take("com_weight", s.com_weight, positions);
  take("com_row", s.com_row, positions);
  take("com_col", s.com_col, positions);
  s.images.resize(std::size(kPreparedPresets));
  for (size_t k = 0; k < std::size(kPreparedPresets); ++k) take(kPreparedPresets[k], s.images[k], positions);
  take("pattern_sum", s.pattern_sum, pixels);
  take("pattern_max", s.pattern_max, pixels);
  return p;
}

std::vector<ProductCache::Entry> ProductCache::entries() const {
  std::vector<Entry> out;
  SqliteStmt q(*db_, "SELECT key, report, created_at FROM prepared ORDER BY key");
  while (q.step()) out.push_back({q.text(0), nlohmann::json::parse(q.text(1), nullptr, false), q.int64(2)});
  for (Entry& e : out)
    if (e.report.is_discarded()) e.report = nullptr;
  return out;
}

void ProductCache::store(const std::string& key, const PreparedProducts& p) {
  const ProductResult& s = p.sums;
  const nlohmann::json report = {
      {"scan_shape", s.scan_shape}, {"frame_shape", s.frame_shape}, {"positions", s.positions},
      {"evaluated_as", s.evaluated_as}, {"provenance", s.load_provenance}, {"seconds", s.seconds},
      {"decoded_bytes", s.decoded_bytes}, {"prepare_seconds", p.prepare_seconds}, {"detectors", p.detectors},
      {"disk", {{"row", p.disk.row}, {"col", p.disk.col}, {"radius", p.disk.radius}, {"area", p.disk.area},
                {"threshold", p.disk.threshold}}}};
  SqliteTransaction tx(*db_);
  SqliteStmt del(*db_, "DELETE FROM prepared WHERE key = ?");
  del.bind(1, key).run();
  SqliteStmt head(*db_, "INSERT INTO prepared(key, report, created_at) VALUES(?, ?, ?)");
  head.bind(1, key).bind(2, report.dump()).bind(3, static_cast<int64_t>(std::time(nullptr))).run();
  SqliteStmt ins(*db_, "INSERT INTO arrays(key, name, data) VALUES(?, ?, ?)");
  put(ins, key, "totals", s.totals);
  put(ins, key, "com_weight", s.com_weight);
  put(ins, key, "com_row", s.com_row);
  put(ins, key, "com_col", s.com_col);
  for (size_t k = 0; k < std::size(kPreparedPresets); ++k) put(ins, key, kPreparedPresets[k], s.images.at(k));
  put(ins, key, "pattern_sum", s.pattern_sum);
  put(ins, key, "pattern_max", s.pattern_max);
  tx.commit();
}

std::optional<PreparedProducts> lookup_prepared(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load,
                                                nlohmann::json& report) {
  const std::string path = cache_path.empty() ? default_product_cache_path() : cache_path;
  try {
    if (cache_path.empty() && !std::filesystem::exists(path)) {
      report["cache"] = {{"hit", false}, {"database", path}};
      return std::nullopt;
    }
    ProductCache cache(path);
    auto p = cache.load(product_cache_key(acq, load));
    report["cache"] = {{"hit", p.has_value()}, {"database", path}};
    if (p) report["cache"]["prepare_seconds"] = p->prepare_seconds;
    return p;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::BadInput) throw;
    report["cache"] = {{"hit", false}, {"database", path}, {"warning", e.what()}};
    return std::nullopt;
  }
}

PreparedLookup find_prepared(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load) {
  const std::string path = cache_path.empty() ? default_product_cache_path() : cache_path;
  PreparedLookup out;
  nlohmann::json& st = out.status;
  st = {{"database", path}, {"exists", false}, {"hit", false}, {"others", nlohmann::json::array()}};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    st["why"] = "no product cache at " + path + " (tensormorph stem prepare writes one)";
    return out;
  }
  st["exists"] = true;
  const std::string key = product_cache_key(acq, load);
  const nlohmann::json ours = nlohmann::json::parse(key);
  try {
    ProductCache cache(path);
    std::optional<ProductCache::Entry> mine;
    const std::string master = std::filesystem::weakly_canonical(acq.master, ec).string();
    for (ProductCache::Entry& e : cache.entries()) {
      if (e.key == key) {
        mine = std::move(e);
        continue;
      }
      const nlohmann::json* source = e.report.is_object() ? &e.report : nullptr;
      for (const char* k : {"provenance", "source"}) source = source && source->contains(k) ? &(*source)[k] : nullptr;
      if (!source || !source->is_object() || !source->contains("master") || !(*source)["master"].is_string()) continue;
      if (std::filesystem::weakly_canonical((*source)["master"].get<std::string>(), ec).string() != master) continue;
      const nlohmann::json theirs = nlohmann::json::parse(e.key, nullptr, false);
      st["others"].push_back({{"key", theirs}, {"created_at", e.created_at}, {"created", prepared_utc_text(e.created_at)},
                              {"why", theirs.is_object() ? prepared_mismatch_why(ours, theirs) : "its key is not JSON"}});
    }
    if (!mine) {
      st["why"] = st["others"].empty() ? "the cache holds no entry for this acquisition and view (stem prepare " + acq.master + ")"
                                       : "no entry for the acquisition as it is now: " + st["others"][0]["why"].get<std::string>();
      return out;
    }
    out.products = cache.load(key);  // BadInput for a damaged entry: no hit, said below
    const PreparedProducts& p = *out.products;
    const nlohmann::json& source = mine->report["provenance"]["source"];
    st["hit"] = true;
    st["entry"] = {{"key", ours}, {"created_at", mine->created_at}, {"created", prepared_utc_text(mine->created_at)},
                   {"prepare_seconds", p.prepare_seconds}, {"master", source.value("master", acq.master)},
                   {"signature", acq.signature}, {"scan_shape", p.sums.scan_shape}, {"frame_shape", p.sums.frame_shape},
                   {"positions", p.sums.positions},
                   {"disk", {{"row", p.disk.row}, {"col", p.disk.col}, {"radius", p.disk.radius}, {"area", p.disk.area},
                             {"threshold", json_number(p.disk.threshold)}}},
                   {"detectors", p.detectors},
                   {"products", {"bf", "abf", "adf", "haadf", "df", "com", "dpc", "idpc", "mean-dp"}}};
  } catch (const Error& e) {
    out.products.reset();
    st["hit"] = false;
    st.erase("entry");
    st["why"] = e.what();
  } catch (const nlohmann::json::exception& e) {
    out.products.reset();
    st["hit"] = false;
    st.erase("entry");
    st["why"] = path + ": prepared products are damaged (report: " + e.what() + "); delete the file to rebuild it";
  }
  return out;
}

nlohmann::json prepare_and_store(const std::string& cache_path, const Acquisition& acq, const LoadRequest& load,
                                 const Planner& planner) {
  const PreparedProducts p = prepare_products(acq, load, planner);
  ProductCache cache(cache_path.empty() ? default_product_cache_path() : cache_path);
  const std::string key = product_cache_key(acq, load);
  cache.store(key, p);
  return {{"database", cache.path()},
          {"key", nlohmann::json::parse(key)},
          {"scan_shape", p.sums.scan_shape},
          {"frame_shape", p.sums.frame_shape},
          {"disk", {{"row", p.disk.row}, {"col", p.disk.col}, {"radius", p.disk.radius}}},
          {"detectors", p.detectors},
          {"seconds", p.prepare_seconds},
          {"placement", placements_json(p.sums.placements)}};
}

}  // namespace tmorph
