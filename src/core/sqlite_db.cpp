#include "core/sqlite_db.h"

#include <sqlite3.h>

#include <cmath>
#include <cstring>

#include "core/path_kind.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// `path` as the path part of a file: URI: '%', '?' and '#' (and bytes outside printable ASCII) escaped.
std::string uri_path(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : path) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '%' || c == '?' || c == '#' || c <= 0x20 || c >= 0x7F) {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace

SqliteDb::SqliteDb(const std::string& path, Mode mode) : path_(mode == Mode::Memory ? ":memory:" : path) {
  if (mode != Mode::Memory) regular_file_or_missing(path);  // a FIFO would block
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= mode == Mode::ReadOnly || mode == Mode::Immutable ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::string name = path_;
  if (mode == Mode::Immutable) {
    flags |= SQLITE_OPEN_URI;
    name = "file:" + uri_path(path_) + "?immutable=1";
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(ErrorKind::Io, path_ + ": cannot open the index database: " + msg);
  }
  sqlite3_busy_timeout(db_, 10000);  // another process indexing the same checkpoint: wait, then fail
  sqlite3_extended_result_codes(db_, 1);
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

void SqliteDb::fail(const std::string& what) const {
  throw Error(ErrorKind::Io, path_ + ": index database: " + what + ": " + sqlite3_errmsg(db_));
}

void SqliteDb::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw Error(ErrorKind::Io, path_ + ": index database: " + msg + " (in: " + std::string(sql).substr(0, 60) + ")");
  }
}

int64_t SqliteDb::last_insert_rowid() { return sqlite3_last_insert_rowid(db_); }

void SqliteDb::copy_from(SqliteDb& from) {
  sqlite3_backup* b = sqlite3_backup_init(db_, "main", from.db_, "main");
  if (!b) fail("cannot copy " + from.path());
  const int rc = sqlite3_backup_step(b, -1);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) fail("copying " + from.path() + " failed");
}

SqliteStmt::SqliteStmt(SqliteDb& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr) != SQLITE_OK)
    db.fail(std::string("cannot prepare '") + std::string(sql).substr(0, 60) + "'");
}

SqliteStmt::~SqliteStmt() { sqlite3_finalize(stmt_); }

SqliteStmt& SqliteStmt::bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) db_.fail("bind");
  return *this;
}

SqliteStmt& SqliteStmt::bind(int i, double v) {
  if ((std::isnan(v) ? sqlite3_bind_null(stmt_, i) : sqlite3_bind_double(stmt_, i, v)) != SQLITE_OK) db_.fail("bind");
  return *this;
}

SqliteStmt& SqliteStmt::bind(int i, std::string_view v) {
  if (sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8) != SQLITE_OK) db_.fail("bind");
  return *this;
}

SqliteStmt& SqliteStmt::bind_blob(int i, const void* data, size_t bytes) {
  if (sqlite3_bind_blob64(stmt_, i, bytes ? data : "", bytes, SQLITE_TRANSIENT) != SQLITE_OK) db_.fail("bind");
  return *this;
}

SqliteStmt& SqliteStmt::bind_null(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) db_.fail("bind");
  return *this;
}

bool SqliteStmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail("statement failed");
}

void SqliteStmt::run() {
  while (step()) {
  }
  reset();
}

void SqliteStmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t SqliteStmt::int64(int col) const { return sqlite3_column_int64(stmt_, col); }

double SqliteStmt::real(int col) const {
  return is_null(col) ? std::nan("") : sqlite3_column_double(stmt_, col);
}

std::string SqliteStmt::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : "";
}

std::vector<uint8_t> SqliteStmt::blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>{};
}

bool SqliteStmt::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

SqliteTransaction::SqliteTransaction(SqliteDb& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

SqliteTransaction::~SqliteTransaction() {
  if (open_) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void SqliteTransaction::commit() {
  db_.exec("COMMIT");
  open_ = false;
}

}  // namespace tmorph
