// A small RAII layer over SQLite (Debian's libsqlite3): one connection, prepared statements with
// typed binds and columns, transactions. Every failure throws tmorph::Error naming the database file
// and SQLite's own message. One connection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace tmorph {

class SqliteDb;

class SqliteStmt {
 public:
  SqliteStmt(SqliteDb& db, const char* sql);
  ~SqliteStmt();
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;

  // Binds are 1-based, as in SQL. A NaN double is stored as NULL (SQLite has no NaN).
  SqliteStmt& bind(int i, int64_t v);
  SqliteStmt& bind(int i, double v);
  SqliteStmt& bind(int i, std::string_view v);
  SqliteStmt& bind_blob(int i, const void* data, size_t bytes);
  SqliteStmt& bind_null(int i);
  // Advances; true while a row is available. Throws on error.
  bool step();
  // Runs to completion and rewinds for reuse (binds are cleared).
  void run();
  void reset();

  // Columns are 0-based. NULL reads as 0, NaN (double), "" or an empty blob.
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::vector<uint8_t> blob(int col) const;
  bool is_null(int col) const;

 private:
  SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteDb {
 public:
  // Immutable: read-only, and SQLite is told the file cannot change, so it takes no locks and needs no
  // -shm file; the only way to read a WAL database on a read-only volume. A -wal file's commits are not
  // seen in this mode.
  enum class Mode { ReadWriteCreate, ReadOnly, Immutable, Memory };
  SqliteDb(const std::string& path, Mode mode);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  void exec(const char* sql);
  int64_t last_insert_rowid();
  // Copies every table of `from` into this database (sqlite3_backup), replacing what is here.
  void copy_from(SqliteDb& from);
  const std::string& path() const { return path_; }
  sqlite3* handle() { return db_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK unless commit() was called.
class SqliteTransaction {
 public:
  explicit SqliteTransaction(SqliteDb& db);
  ~SqliteTransaction();
  void commit();

 private:
  SqliteDb& db_;
  bool open_ = true;
};

}  // namespace tmorph
