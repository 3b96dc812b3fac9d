#include "diff/diff_store.h"

#include <xxhash.h>

#include <cstring>
#include <filesystem>

#include "core/file_identity.h"
#include "core/path_kind.h"
#include "core/sqlite_db.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

// 2: level-0 sums in the 8 contract lanes of diff.tile_stats (1 summed in 4 lanes: last bits differ).
constexpr const char* kSchemaVersion = "2";

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pairs(
  id INTEGER PRIMARY KEY, name_a TEXT NOT NULL, name_b TEXT NOT NULL, rows_order TEXT NOT NULL,
  view TEXT NOT NULL, slices INTEGER NOT NULL, rows INTEGER NOT NULL, cols INTEGER NOT NULL,
  tile_rows INTEGER NOT NULL, tile_cols INTEGER NOT NULL, levels INTEGER NOT NULL, edges BLOB NOT NULL,
  UNIQUE(name_a, name_b, rows_order));
CREATE TABLE IF NOT EXISTS diff_tiles(
  pair_id INTEGER NOT NULL REFERENCES pairs(id) ON DELETE CASCADE,
  level INTEGER NOT NULL, slice INTEGER NOT NULL, ty INTEGER NOT NULL, tx INTEGER NOT NULL, record BLOB NOT NULL,
  PRIMARY KEY(pair_id, level, slice, ty, tx)) WITHOUT ROWID;
)sql";

std::string absolute_path(const std::string& p) { return fs::absolute(p).lexically_normal().string(); }

std::string meta_value(SqliteDb& db, const char* key) {
  SqliteStmt q(db, "SELECT value FROM meta WHERE key = ?");
  q.bind(1, std::string_view(key));
  return q.step() ? q.text(0) : "";
}

void set_meta(SqliteDb& db, const char* key, const std::string& value) {
  SqliteStmt q(db, "INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value");
  q.bind(1, std::string_view(key)).bind(2, value).run();
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

std::string safe_stem(const std::string& path) {
  std::string stem = fs::path(absolute_path(path)).filename().string();
  if (stem.empty()) stem = "checkpoint";
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  return stem.substr(0, 40);
}

void append_identities(std::string& out, const Checkpoint& c) {
  for (size_t k = 0; k < c.files.size(); ++k) {
    const std::string path = absolute_path(c.files[k]->path());
    const auto id = file_identity(path, k < c.header_bytes.size() ? c.header_bytes[k] : 0);
    if (!id) throw Error(ErrorKind::Io, path + ": changed while it was being read");
    out += id->path + "|" + std::to_string(id->size) + "|" + std::to_string(id->mtime_ns) + "|" + id->header_hash + "\n";
  }
}

}  // namespace

std::string checkpoints_identity(const Checkpoint& a, const Checkpoint& b) {
  std::string s = "A\n";
  append_identities(s, a);
  s += "B\n";
  append_identities(s, b);
  return hex64(XXH3_64bits(s.data(), s.size()));
}

std::string default_diff_index_path(const std::string& a, const std::string& b) {
  const std::string key = absolute_path(a) + "\n" + absolute_path(b);
  return cache_dir() + "/diff/" + safe_stem(a) + "-vs-" + safe_stem(b) + "-" + hex64(XXH3_64bits(key.data(), key.size())) +
         ".sqlite";
}

DiffStore::DiffStore(const std::string& index_path, const std::string& a_path, const std::string& b_path,
                     const std::string& identity) {
  const bool explicit_path = !index_path.empty();
  const std::string path = explicit_path ? index_path : default_diff_index_path(a_path, b_path);
  report_.database = path;
  regular_file_or_missing(path);  // a FIFO or a folder is a mistake (Io), not a read-only index
  const auto init = [](SqliteDb& db) {
    db.exec("PRAGMA foreign_keys = ON");
    db.exec(kSchema);
    const std::string version = meta_value(db, "schema_version");
    if (!version.empty() && version != kSchemaVersion) {
      db.exec("DROP TABLE diff_tiles; DROP TABLE pairs; DROP TABLE meta;");
      db.exec(kSchema);
    }
    set_meta(db, "schema_version", kSchemaVersion);
  };
  try {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    auto db = std::make_unique<SqliteDb>(path, SqliteDb::Mode::ReadWriteCreate);
    if (path != ":memory:") db->exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    init(*db);
    db_ = std::move(db);
  } catch (const Error& e) {
    const std::string why = e.what();
    if (explicit_path && why.find("not a database") != std::string::npos)
      throw Error(ErrorKind::BadInput, path + ": not a Tensormorph difference index (SQLite: file is not a database)");
    db_ = std::make_unique<SqliteDb>("", SqliteDb::Mode::Memory);
    init(*db_);
    report_.persisted = false;
    report_.database = ":memory:";
    report_.warning = "difference index not saved (" + why + "); this run's pyramids are kept in memory only";
  }
  const std::string pair_key = absolute_path(a_path) + "\n" + absolute_path(b_path);
  const std::string owner = meta_value(*db_, "checkpoints");
  if (!owner.empty() && owner != pair_key && explicit_path)
    throw Error(ErrorKind::InvalidArgument, path + ": this difference index belongs to checkpoints " + owner.substr(0, owner.find('\n')) +
                                                " and " + owner.substr(owner.find('\n') + 1) + ", not to these");
  if (meta_value(*db_, "identity") != identity) {
    if (!owner.empty() && report_.warning.empty()) report_.warning = "the checkpoints changed since the stored pyramids were built: rebuilt";
    db_->exec("DELETE FROM diff_tiles; DELETE FROM pairs;");
    set_meta(*db_, "identity", identity);
    set_meta(*db_, "checkpoints", pair_key);
  }
}

DiffStore::~DiffStore() = default;

std::optional<DiffPyramid> DiffStore::load(const std::string& name_a, const std::string& name_b, const std::string& rows,
                                           const View2D& view) const {
  SqliteStmt q(*db_,
               "SELECT id, view, slices, rows, cols, tile_rows, tile_cols, levels, edges FROM pairs WHERE name_a = ? AND "
               "name_b = ? AND rows_order = ?");
  q.bind(1, name_a).bind(2, name_b).bind(3, rows);
  if (!q.step()) return std::nullopt;
  const std::string where = report_.database + ": difference pyramid of " + name_a + " and " + name_b;
  DiffPyramid p;
  p.layout = make_pyramid_layout(view);
  const PyramidLayout& l = p.layout;
  if (q.text(1) != view_spec(view) || static_cast<uint64_t>(q.int64(2)) != view.slices ||
      static_cast<uint64_t>(q.int64(3)) != view.rows || static_cast<uint64_t>(q.int64(4)) != view.cols ||
      q.int64(5) != l.tile_rows || q.int64(6) != l.tile_cols || static_cast<size_t>(q.int64(7)) != l.levels.size())
    throw Error(ErrorKind::BadInput, where + ": the stored layout does not match the tensors' shape (delete the index file to rebuild it)");
  const auto edges = q.blob(8);
  if (edges.size() % sizeof(double) != 0 || edges.size() == sizeof(double))
    throw Error(ErrorKind::BadInput, where + ": histogram edges of " + std::to_string(edges.size()) + " bytes; expected a multiple of 8, not 8");
  p.edges.resize(edges.size() / sizeof(double));
  if (!edges.empty()) std::memcpy(p.edges.data(), edges.data(), edges.size());
  const size_t bins = p.edges.empty() ? 0 : p.edges.size() - 1;
  size_t total = 0;
  for (unsigned level = 0; level < l.levels.size(); ++level) total += view.slices * l.tiles_per_slice(level);
  SqliteStmt t(*db_, "SELECT level, slice, ty, tx, record FROM diff_tiles WHERE pair_id = ? ORDER BY level, slice, ty, tx");
  t.bind(1, q.int64(0));
  p.tiles.reserve(total);
  while (t.step() && p.tiles.size() < total) {
    const auto record = t.blob(4);
    p.tiles.push_back(decode_diff_tile(record.data(), record.size(), bins,
                                       where + ", tile " + std::to_string(t.int64(0)) + "/" + std::to_string(t.int64(1)) + "/" +
                                           std::to_string(t.int64(2)) + "/" + std::to_string(t.int64(3))));
  }
  if (p.tiles.size() != total)
    throw Error(ErrorKind::BadInput, where + ": " + std::to_string(p.tiles.size()) + " tiles stored; expected " +
                                         std::to_string(total) + " (delete the index file to rebuild it)");
  return p;
}

void DiffStore::store(const std::string& name_a, const std::string& name_b, const std::string& rows, const DiffPyramid& p) {
  const PyramidLayout& l = p.layout;
  SqliteTransaction tx(*db_);
  SqliteStmt del(*db_, "DELETE FROM pairs WHERE name_a = ? AND name_b = ? AND rows_order = ?");
  del.bind(1, name_a).bind(2, name_b).bind(3, rows).run();
  SqliteStmt head(*db_,
                  "INSERT INTO pairs(name_a, name_b, rows_order, view, slices, rows, cols, tile_rows, tile_cols, levels, edges) "
                  "VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  head.bind(1, name_a).bind(2, name_b).bind(3, rows).bind(4, view_spec(l.view));
  head.bind(5, static_cast<int64_t>(l.view.slices)).bind(6, static_cast<int64_t>(l.view.rows));
  head.bind(7, static_cast<int64_t>(l.view.cols)).bind(8, int64_t{l.tile_rows}).bind(9, int64_t{l.tile_cols});
  head.bind(10, static_cast<int64_t>(l.levels.size())).bind_blob(11, p.edges.data(), p.edges.size() * sizeof(double)).run();
  const int64_t id = db_->last_insert_rowid();
  SqliteStmt ins(*db_, "INSERT INTO diff_tiles(pair_id, level, slice, ty, tx, record) VALUES(?,?,?,?,?,?)");
  size_t k = 0;
  for (unsigned level = 0; level < l.levels.size(); ++level)
    for (uint64_t s = 0; s < l.view.slices; ++s)
      for (uint64_t ty = 0; ty < l.levels[level].rows; ++ty)
        for (uint64_t tx2 = 0; tx2 < l.levels[level].cols; ++tx2) {
          const std::vector<uint8_t> record = encode_diff_tile(p.tiles[k++]);
          ins.bind(1, id).bind(2, int64_t{level}).bind(3, static_cast<int64_t>(s)).bind(4, static_cast<int64_t>(ty));
          ins.bind(5, static_cast<int64_t>(tx2)).bind_blob(6, record.data(), record.size()).run();
        }
  tx.commit();
}

}  // namespace tmorph
