#include "index/checkpoint_index.h"

#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/openers/open_checkpoint.h"
#include "core/file_identity.h"
#include "core/path_kind.h"
#include "core/sqlite_db.h"
#include "core/utc_time.h"
#include "ops/placement_json.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

// Bump when the tables change; an index of another version is rebuilt.
constexpr const char* kSchemaVersion = "7";  // 6: tensors.damaged; 7: tensors.encoded

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, role TEXT NOT NULL, ordinal INTEGER NOT NULL,
  size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, header_bytes INTEGER NOT NULL, header_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS metadata(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tensors(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
  file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE, ordinal INTEGER NOT NULL,
  stored_type TEXT NOT NULL, dtype TEXT, ggml_type INTEGER, unavailable_reason TEXT NOT NULL, shape TEXT NOT NULL, ne TEXT NOT NULL,
  elements INTEGER NOT NULL, bytes INTEGER NOT NULL, offset INTEGER NOT NULL, packed TEXT, strides TEXT NOT NULL,
  chunks TEXT NOT NULL, damaged INTEGER NOT NULL, encoded TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tensors_by_file ON tensors(file_id);
CREATE TABLE IF NOT EXISTS stats(
  tensor_id INTEGER PRIMARY KEY REFERENCES tensors(id) ON DELETE CASCADE,
  count INTEGER, finite_count INTEGER, nan_count INTEGER, inf_count INTEGER, zero_count INTEGER,
  min REAL, max REAL, abs_max REAL, sum REAL, mean REAL, std REAL,
  is_integer INTEGER, int_min TEXT, int_max TEXT, int_sum TEXT,
  quantile_method TEXT, quantiles_exact INTEGER, quantiles TEXT, placement TEXT, seconds REAL, indexed_at TEXT);
CREATE TABLE IF NOT EXISTS histograms(
  tensor_id INTEGER PRIMARY KEY REFERENCES tensors(id) ON DELETE CASCADE,
  edges BLOB NOT NULL, counts BLOB NOT NULL, below INTEGER NOT NULL, above INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pyramids(
  tensor_id INTEGER PRIMARY KEY REFERENCES tensors(id) ON DELETE CASCADE,
  view TEXT NOT NULL, slices INTEGER NOT NULL, rows INTEGER NOT NULL, cols INTEGER NOT NULL,
  tile_rows INTEGER NOT NULL, tile_cols INTEGER NOT NULL, levels INTEGER NOT NULL, edges BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS pyramid_tiles(
  tensor_id INTEGER NOT NULL REFERENCES tensors(id) ON DELETE CASCADE,
  level INTEGER NOT NULL, slice INTEGER NOT NULL, ty INTEGER NOT NULL, tx INTEGER NOT NULL, record BLOB NOT NULL,
  PRIMARY KEY(tensor_id, level, slice, ty, tx)) WITHOUT ROWID;
)sql";

std::string absolute_path(const std::string& path) { return fs::absolute(path).lexically_normal().string(); }

// "4096,11008" <-> {4096, 11008}; the empty string is a scalar.
std::string join_dims(const std::vector<uint64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s.push_back(',');
    s.append(std::to_string(dims[i]));
  }
  return s;
}

// A chunked tensor's chunks as JSON: [[file index, file offset, [offsets], [sizes]], ...] ("" when none).
std::string chunks_to_text(const std::vector<TensorChunk>& chunks) {
  if (chunks.empty()) return "";
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : chunks) j.push_back({c.file_index, c.file_offset, c.offsets, c.sizes});
  return j.dump();
}

std::vector<TensorChunk> chunks_from_text(const std::string& text) {
  std::vector<TensorChunk> out;
  if (text.empty()) return out;
  for (const auto& j : nlohmann::json::parse(text))
    out.push_back({j.at(0).get<size_t>(), j.at(1).get<uint64_t>(), j.at(2).get<std::vector<uint64_t>>(), j.at(3).get<std::vector<uint64_t>>()});
  return out;
}

// Encoded values (ONNX's typed fields) as JSON: {"encoding": "varints", "runs": [[offset, bytes], ...]} ("" when none).
std::string encoded_to_text(const EncodedValues* v) {
  if (!v) return "";
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : v->runs) runs.push_back({r.offset, r.bytes});
  return nlohmann::json{{"encoding", value_encoding_name(v->encoding)}, {"runs", runs}}.dump();
}

std::optional<EncodedValues> encoded_from_text(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const auto j = nlohmann::json::parse(text);
  EncodedValues v;
  const auto e = parse_value_encoding(j.at("encoding").get<std::string>());
  if (!e) throw Error(ErrorKind::BadInput, "index: tensors.encoded names an unknown encoding: " + text);
  v.encoding = *e;
  for (const auto& r : j.at("runs")) v.runs.push_back({r.at(0).get<uint64_t>(), r.at(1).get<uint64_t>()});
  return v;
}

std::vector<uint64_t> split_dims(const std::string& s) {
  std::vector<uint64_t> dims;
  const char* p = s.c_str();
  while (*p) {
    char* end = nullptr;
    dims.push_back(std::strtoull(p, &end, 10));
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p) break;
  }
  return dims;
}

std::string meta_value(SqliteDb& db, const char* key) {
  SqliteStmt q(db, "SELECT value FROM meta WHERE key = ?");
  q.bind(1, std::string_view(key));
  return q.step() ? q.text(0) : "";
}

void set_meta(SqliteDb& db, const char* key, const std::string& value) {
  SqliteStmt q(db, "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  q.bind(1, std::string_view(key)).bind(2, value).run();
}

std::string stats_contract() {
  const StatsOptions o = CheckpointIndex::index_options();
  std::string s = "bins=" + std::to_string(o.bins) + ";p=";
  for (double p : o.probabilities) s += std::to_string(p) + ",";
  return s;
}

}  // namespace

std::string default_index_path(const std::string& checkpoint_path) {
  const std::string abs = absolute_path(checkpoint_path);
  std::string stem = fs::path(abs).filename().string();
  if (stem.empty()) stem = "checkpoint";
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(XXH3_64bits(abs.data(), abs.size())));
  return cache_dir() + "/index/" + stem.substr(0, 64) + "-" + hash + ".sqlite";
}

StatsOptions CheckpointIndex::index_options() { return StatsOptions{}; }

CheckpointIndex::CheckpointIndex(const std::string& checkpoint_path, const std::string& index_path)
    : checkpoint_key_(absolute_path(checkpoint_path)) {
  open_database(index_path.empty() ? default_index_path(checkpoint_path) : index_path, !index_path.empty());
  const std::string owner = meta_value(*db_, "checkpoint");
  if (!owner.empty() && owner != checkpoint_key_) {
    if (!index_path.empty())
      throw Error(ErrorKind::InvalidArgument, index_path + ": this index belongs to checkpoint " + owner + ", not " + checkpoint_key_);
    db_->exec("DELETE FROM files; DELETE FROM metadata; DELETE FROM meta;");
  }
  if (meta_value(*db_, "stats_contract") != stats_contract()) db_->exec("DELETE FROM stats; DELETE FROM histograms; DELETE FROM pyramids; DELETE FROM pyramid_tiles;");
  const std::string layout = checkpoint_layout(checkpoint_path);
  report_.reused = load_if_unchanged(layout);
  if (!report_.reused) reconcile(checkpoint_key_, layout);
  load_stats_presence();
}

CheckpointIndex::~CheckpointIndex() = default;

void CheckpointIndex::open_database(const std::string& path, bool explicit_path) {
  report_.database = path;
  auto init = [&](SqliteDb& db) {
    db.exec("PRAGMA foreign_keys = ON");
    if (db.path() != ":memory:") db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    db.exec(kSchema);
    const std::string version = meta_value(db, "schema_version");
    if (!version.empty() && version != kSchemaVersion) {
      db.exec("DROP TABLE IF EXISTS pyramid_tiles; DROP TABLE IF EXISTS pyramids; DROP TABLE histograms; DROP TABLE stats; DROP TABLE tensors; DROP TABLE metadata; DROP TABLE files; "
              "DROP TABLE meta;");
      db.exec(kSchema);
    }
    set_meta(db, "schema_version", kSchemaVersion);
  };
  // A path that names a FIFO, a device or a folder (or loops) is a mistake, not a read-only index: SQLite
  // would block on a FIFO. Io error (exit 6).
  regular_file_or_missing(path);
  std::string why;
  try {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    auto db = std::make_unique<SqliteDb>(path, SqliteDb::Mode::ReadWriteCreate);
    init(*db);
    db_ = std::move(db);
    return;
  } catch (const Error& e) {
    why = e.what();
  }
  const bool not_a_db = why.find("not a database") != std::string::npos;
  if (not_a_db && explicit_path)
    throw Error(ErrorKind::BadInput, path + ": not a Tensormorph index (SQLite: file is not a database)");
  if (not_a_db) {  // a damaged cache entry: rebuild it
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(path + suffix, ec);
    try {
      auto db = std::make_unique<SqliteDb>(path, SqliteDb::Mode::ReadWriteCreate);
      init(*db);
      db_ = std::move(db);
      report_.warning = "the cached index was damaged and has been rebuilt";
      return;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  // Not writable: continue in memory, starting from the stored index when it can be read.
  db_ = std::make_unique<SqliteDb>("", SqliteDb::Mode::Memory);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    // A WAL database on a read-only volume cannot be opened read-only in place (SQLite needs its -shm
    // file): read it as immutable then.
    for (const auto mode : {SqliteDb::Mode::ReadOnly, SqliteDb::Mode::Immutable}) {
      try {
        SqliteDb stored(path, mode);
        db_->copy_from(stored);
        break;
      } catch (const Error&) {
        db_ = std::make_unique<SqliteDb>("", SqliteDb::Mode::Memory);
      }
    }
  }
  init(*db_);
  report_.persisted = false;
  report_.database = ":memory:";
  report_.warning = "index not saved (" + why + "); this run's statistics are kept in memory only";
}

bool CheckpointIndex::load_if_unchanged(const std::string& layout) {
  if (meta_value(*db_, "checkpoint") != checkpoint_key_ || meta_value(*db_, "layout") != layout) return false;
  std::vector<std::pair<int64_t, std::string>> shards;  // (id, path) in checkpoint order
  {
    SqliteStmt q(*db_, "SELECT id, path, role, size, mtime_ns, header_bytes, header_hash FROM files ORDER BY role, ordinal");
    bool any = false;
    while (q.step()) {
      any = true;
      FileIdentity stored{q.text(1), static_cast<uint64_t>(q.int64(3)), q.int64(4), static_cast<uint64_t>(q.int64(5)), q.text(6)};
      const auto now = file_identity(stored.path, stored.header_bytes);
      if (!now || *now != stored) return false;
      if (q.text(2) == "shard") shards.emplace_back(q.int64(0), stored.path);
    }
    if (!any) return false;
  }
  Checkpoint c;
  c.format = meta_value(*db_, "format");
  std::map<int64_t, size_t> file_index;
  for (const auto& [id, path] : shards) {
    file_index[id] = c.files.size();
    c.files.push_back(std::make_shared<MappedFile>(path));
  }
  {
    SqliteStmt q(*db_, "SELECT path FROM files WHERE role = 'sidecar' ORDER BY ordinal");
    while (q.step()) c.sidecars.push_back(q.text(0));
  }
  {
    SqliteStmt q(*db_, "SELECT key, value FROM metadata");
    while (q.step()) c.metadata.emplace(q.text(0), q.text(1));
  }
  SqliteStmt q(*db_,
               "SELECT id, name, file_id, stored_type, dtype, unavailable_reason, shape, ne, elements, bytes, offset, "
               "ggml_type, packed, strides, chunks, damaged, encoded FROM tensors ORDER BY ordinal");
  std::vector<int64_t> ids;
  while (q.step()) {
    CheckpointTensor t;
    ids.push_back(q.int64(0));
    t.name = q.text(1);
    t.file_index = file_index.at(q.int64(2));
    t.stored_type = q.text(3);
    if (!q.is_null(4)) t.dtype = parse_dtype(q.text(4));
    t.unavailable_reason = q.text(5);
    t.shape = split_dims(q.text(6));
    t.ne = split_dims(q.text(7));
    t.elements = static_cast<uint64_t>(q.int64(8));
    t.bytes = static_cast<uint64_t>(q.int64(9));
    t.file_offset = static_cast<uint64_t>(q.int64(10));
    // The storage form: one of its columns is set (none for a dense tensor in place).
    if (!q.is_null(11)) t.storage = GgmlBlockStorage{static_cast<uint32_t>(q.int64(11))};
    else if (!q.is_null(12)) t.storage = PackedStorage{packed_from_json(nlohmann::json::parse(q.text(12)))};
    else if (auto strides = split_dims(q.text(13)); !strides.empty()) t.storage = StridedStorage{std::move(strides)};
    else if (auto chunks = chunks_from_text(q.text(14)); !chunks.empty()) t.storage = ChunkedStorage{std::move(chunks)};
    else if (auto encoded = encoded_from_text(q.text(16))) t.storage = EncodedStorage{std::move(*encoded)};
    t.damaged = q.int64(15) != 0;
    c.tensors.push_back(std::move(t));
  }
  checkpoint_ = std::move(c);
  tensor_ids_ = std::move(ids);
  return true;
}

void CheckpointIndex::reconcile(const std::string& checkpoint_path, const std::string& layout) {
  Checkpoint c = open_checkpoint(checkpoint_path);
  struct Wanted {
    FileIdentity id;
    std::string role;
    size_t ordinal;
  };
  std::vector<Wanted> wanted;
  for (size_t k = 0; k < c.files.size(); ++k) {
    const std::string path = absolute_path(c.files[k]->path());
    auto id = file_identity(path, c.header_bytes[k]);
    if (!id) throw Error(ErrorKind::Io, path + ": changed while it was being indexed");
    wanted.push_back({*id, "shard", k});
  }
  for (size_t k = 0; k < c.sidecars.size(); ++k) {
    const std::string path = absolute_path(c.sidecars[k]);
    const auto size = fs::file_size(path);
    auto id = file_identity(path, size);
    if (!id) throw Error(ErrorKind::Io, path + ": changed while it was being indexed");
    wanted.push_back({*id, "sidecar", k});
  }

  SqliteTransaction tx(*db_);
  std::map<std::string, std::pair<int64_t, FileIdentity>> stored;  // path -> (id, identity)
  {
    SqliteStmt q(*db_, "SELECT id, path, size, mtime_ns, header_bytes, header_hash FROM files");
    while (q.step())
      stored[q.text(1)] = {q.int64(0), {q.text(1), static_cast<uint64_t>(q.int64(2)), q.int64(3),
                                        static_cast<uint64_t>(q.int64(4)), q.text(5)}};
  }
  // Drop every file that is gone or changed (its tensors and their statistics go with it).
  std::map<std::string, int64_t> kept;  // path -> id
  {
    SqliteStmt del(*db_, "DELETE FROM files WHERE id = ?");
    for (const auto& [path, row] : stored) {
      const std::string& stored_path = path;  // a named reference: clang 14 cannot capture structured bindings
      const auto w = std::find_if(wanted.begin(), wanted.end(), [&](const Wanted& x) { return x.id.path == stored_path; });
      if (w != wanted.end() && w->id == row.second) kept[path] = row.first;
      else del.bind(1, row.first).run();
    }
  }
  std::vector<int64_t> file_ids(c.files.size());
  {
    SqliteStmt ins(*db_,
                   "INSERT INTO files(path, role, ordinal, size, mtime_ns, header_bytes, header_hash) VALUES(?,?,?,?,?,?,?)");
    SqliteStmt ord(*db_, "UPDATE files SET ordinal = ? WHERE id = ?");
    for (const auto& w : wanted) {
      int64_t id;
      if (auto k = kept.find(w.id.path); k != kept.end()) {
        id = k->second;
        ord.bind(1, static_cast<int64_t>(w.ordinal)).bind(2, id).run();
      } else {
        ins.bind(1, w.id.path).bind(2, w.role).bind(3, static_cast<int64_t>(w.ordinal)).bind(4, static_cast<int64_t>(w.id.size));
        ins.bind(5, w.id.mtime_ns).bind(6, static_cast<int64_t>(w.id.header_bytes)).bind(7, w.id.header_hash).run();
        id = db_->last_insert_rowid();
        if (w.role == "shard") report_.reindexed_files.push_back(w.id.path);
      }
      if (w.role == "shard") file_ids[w.ordinal] = id;
    }
  }
  tensor_ids_.assign(c.tensors.size(), 0);
  std::vector<bool> file_was_kept(c.files.size());
  for (size_t k = 0; k < c.files.size(); ++k) file_was_kept[k] = kept.count(wanted[k].id.path) != 0;
  {
    SqliteStmt find(*db_, "SELECT id, packed, chunks, encoded FROM tensors WHERE name = ? AND file_id = ?");
    SqliteStmt ord(*db_, "UPDATE tensors SET ordinal = ? WHERE id = ?");
    SqliteStmt del(*db_, "DELETE FROM tensors WHERE name = ?");
    SqliteStmt ins(*db_,
                   "INSERT INTO tensors(name, file_id, ordinal, stored_type, dtype, unavailable_reason, shape, ne, elements, "
                   "bytes, offset, ggml_type, packed, strides, chunks, damaged, encoded) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const CheckpointTensor& t = c.tensors[i];
      const int64_t fid = file_ids[t.file_index];
      // A packed tensor is kept only when every part's file is, and it is still described the same way
      // (the config decides e.g. GPTQ's zero convention).
      bool file_kept = file_was_kept[t.file_index];
      const std::string packed = t.packed() ? packed_to_json(*t.packed()).dump() : "";
      if (t.packed())
        for (const auto& part : t.packed()->parts) file_kept = file_kept && file_was_kept[part.file_index];
      // A chunked tensor likewise, every chunk's file kept and its chunks where they were.
      const std::string chunks = chunks_to_text(t.chunks());
      for (const auto& chunk : t.chunks()) file_kept = file_kept && file_was_kept[chunk.file_index];
      const std::string encoded = encoded_to_text(t.encoded());  // and encoded values where they were
      if (file_kept) find.bind(1, t.name).bind(2, fid);
      if (file_kept && find.step()) {  // a new file's tensors cannot be stored yet: no lookup
        const int64_t id = find.int64(0);
        const std::string stored_packed = find.is_null(1) ? "" : find.text(1);
        const std::string stored_chunks = find.text(2), stored_encoded = find.text(3);
        find.reset();
        if (stored_packed == packed && stored_chunks == chunks && stored_encoded == encoded) {
          tensor_ids_[i] = id;
          ord.bind(1, static_cast<int64_t>(i)).bind(2, tensor_ids_[i]).run();
          continue;
        }
      }
      find.reset();
      del.bind(1, t.name).run();  // a stale row in a kept file (a packed tensor described differently)
      ins.bind(1, t.name).bind(2, fid).bind(3, static_cast<int64_t>(i)).bind(4, t.stored_type);
      if (t.dtype) ins.bind(5, dtype_name(*t.dtype));
      else ins.bind_null(5);
      ins.bind(6, t.unavailable_reason).bind(7, join_dims(t.shape)).bind(8, join_dims(t.ne));
      ins.bind(9, static_cast<int64_t>(t.elements)).bind(10, static_cast<int64_t>(t.bytes));
      ins.bind(11, static_cast<int64_t>(t.file_offset));
      if (const auto g = t.ggml_type()) ins.bind(12, static_cast<int64_t>(*g));
      else ins.bind_null(12);
      if (t.packed()) ins.bind(13, packed);
      else ins.bind_null(13);
      ins.bind(14, join_dims(t.strides())).bind(15, chunks).bind(16, static_cast<int64_t>(t.damaged)).bind(17, encoded);
      ins.run();
      tensor_ids_[i] = db_->last_insert_rowid();
    }
  }
  db_->exec("DELETE FROM metadata");
  {
    SqliteStmt ins(*db_, "INSERT INTO metadata(key, value) VALUES(?, ?)");
    for (const auto& [k, v] : c.metadata) ins.bind(1, k).bind(2, v).run();
  }
  set_meta(*db_, "checkpoint", checkpoint_key_);
  set_meta(*db_, "layout", layout);
  set_meta(*db_, "format", c.format);
  set_meta(*db_, "stats_contract", stats_contract());
  tx.commit();
  checkpoint_ = std::move(c);
}

void CheckpointIndex::load_stats_presence() {
  has_stats_.assign(checkpoint_.tensors.size(), false);
  std::map<int64_t, size_t> by_id;
  for (size_t i = 0; i < tensor_ids_.size(); ++i) by_id[tensor_ids_[i]] = i;
  SqliteStmt q(*db_, "SELECT tensor_id FROM stats");
  while (q.step())
    if (auto it = by_id.find(q.int64(0)); it != by_id.end()) has_stats_[it->second] = true;
}


std::optional<StatsResult> CheckpointIndex::load_stats(size_t i) const {
  if (!has_stats_[i]) return std::nullopt;
  SqliteStmt q(*db_,
               "SELECT count, finite_count, nan_count, inf_count, zero_count, min, max, abs_max, sum, mean, std, is_integer, "
               "int_min, int_max, int_sum, quantile_method, quantiles_exact, quantiles, placement FROM stats WHERE tensor_id = ?");
  q.bind(1, tensor_ids_[i]);
  if (!q.step()) return std::nullopt;
  StatsResult r;
  MomentsSummary& m = r.moments;
  m.count = static_cast<uint64_t>(q.int64(0)), m.finite_count = static_cast<uint64_t>(q.int64(1));
  m.nan_count = static_cast<uint64_t>(q.int64(2)), m.inf_count = static_cast<uint64_t>(q.int64(3));
  m.zero_count = static_cast<uint64_t>(q.int64(4));
  m.min = q.real(5), m.max = q.real(6), m.abs_max = q.real(7), m.sum = q.real(8), m.mean = q.real(9), m.std = q.real(10);
  m.is_integer = q.int64(11) != 0;
  m.int_min = q.text(12), m.int_max = q.text(13), m.int_sum = q.text(14);
  r.quantile_method = q.text(15);
  r.quantiles_exact = q.int64(16) != 0;
  for (const auto& e : nlohmann::json::parse(q.text(17), nullptr, false)) {
    auto num = [&](const char* k) { return e.contains(k) && e[k].is_number() ? e[k].get<double>() : std::nan(""); };
    r.quantiles.push_back({num("p"), num("value"), num("lo"), num("hi"), e.value("sample_size", uint64_t{0})});
  }
  r.placement = placements_from_json(nlohmann::json::parse(q.text(18), nullptr, false));
  SqliteStmt h(*db_, "SELECT edges, counts, below, above FROM histograms WHERE tensor_id = ?");
  h.bind(1, tensor_ids_[i]);
  if (h.step()) {
    Histogram hist;
    const auto edges = h.blob(0), counts = h.blob(1);
    hist.edges.resize(edges.size() / sizeof(double));
    std::memcpy(hist.edges.data(), edges.data(), hist.edges.size() * sizeof(double));
    hist.counts.resize(counts.size() / sizeof(uint64_t));
    std::memcpy(hist.counts.data(), counts.data(), hist.counts.size() * sizeof(uint64_t));
    hist.below = static_cast<uint64_t>(h.int64(2)), hist.above = static_cast<uint64_t>(h.int64(3));
    r.histogram = std::move(hist);
  }
  return r;
}

void CheckpointIndex::store_stats(size_t i, const StatsResult& r, double seconds, const Pyramid* pyramid) {
  SqliteTransaction tx(*db_);
  const MomentsSummary& m = r.moments;
  nlohmann::json qs = nlohmann::json::array();
  for (const auto& q : r.quantiles) {
    nlohmann::json e = {{"p", q.p}, {"sample_size", q.sample_size}};
    // NaN is not JSON: a quantile of no finite value is stored as null and read back as NaN.
    e["value"] = std::isnan(q.value) ? nlohmann::json(nullptr) : nlohmann::json(q.value);
    e["lo"] = std::isnan(q.lo) ? nlohmann::json(nullptr) : nlohmann::json(q.lo);
    e["hi"] = std::isnan(q.hi) ? nlohmann::json(nullptr) : nlohmann::json(q.hi);
    qs.push_back(e);
  }
  {
    SqliteStmt ins(*db_,
                   "INSERT OR REPLACE INTO stats(tensor_id, count, finite_count, nan_count, inf_count, zero_count, min, max, "
                   "abs_max, sum, mean, std, is_integer, int_min, int_max, int_sum, quantile_method, quantiles_exact, "
                   "quantiles, placement, seconds, indexed_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    ins.bind(1, tensor_ids_[i]).bind(2, static_cast<int64_t>(m.count)).bind(3, static_cast<int64_t>(m.finite_count));
    ins.bind(4, static_cast<int64_t>(m.nan_count)).bind(5, static_cast<int64_t>(m.inf_count));
    ins.bind(6, static_cast<int64_t>(m.zero_count)).bind(7, m.min).bind(8, m.max).bind(9, m.abs_max).bind(10, m.sum);
    ins.bind(11, m.mean).bind(12, m.std).bind(13, int64_t{m.is_integer}).bind(14, m.int_min).bind(15, m.int_max);
    ins.bind(16, m.int_sum).bind(17, r.quantile_method).bind(18, int64_t{r.quantiles_exact}).bind(19, qs.dump());
    ins.bind(20, placements_json(r.placement).dump()).bind(21, seconds).bind(22, utc_now_iso8601()).run();
  }
  if (r.histogram) {
    SqliteStmt ins(*db_, "INSERT OR REPLACE INTO histograms(tensor_id, edges, counts, below, above) VALUES(?,?,?,?,?)");
    ins.bind(1, tensor_ids_[i]).bind_blob(2, r.histogram->edges.data(), r.histogram->edges.size() * sizeof(double));
    ins.bind_blob(3, r.histogram->counts.data(), r.histogram->counts.size() * sizeof(uint64_t));
    ins.bind(4, static_cast<int64_t>(r.histogram->below)).bind(5, static_cast<int64_t>(r.histogram->above)).run();
  }
  if (pyramid) store_pyramid(i, *pyramid);
  tx.commit();
  has_stats_[i] = true;
}

}  // namespace tmorph
