#pragma once
// Internal to db/: the thin layer over SQLite's C API that sqlite_store.cc and
// sqlite_search_tables.cc share. Only included where TESSERA_HAVE_SQLITE is defined. Every
// failure throws SqliteError with SQLite's extended result code.
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/sqlite_store.h"

namespace tessera::db::sql {

[[noreturn]] inline void fail(sqlite3* db, int rc, const std::string& what) {
  const int code = db ? sqlite3_extended_errcode(db) : rc;
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw SqliteError(code ? code : rc, what + ": " + msg);
}

inline void exec(sqlite3* db, const char* text) {
  const int rc = sqlite3_exec(db, text, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, text);
}

// A prepared statement; columns and parameters are indexed as SQLite does (parameters from 1).
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& text) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, text.c_str(), -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) fail(db, rc, "prepare");
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(stmt_, i, v));
    return *this;
  }
  Stmt& bind(int i, std::optional<double> v) {
    check(v ? sqlite3_bind_double(stmt_, i, *v) : sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Stmt& bind(int i, const std::vector<uint8_t>& v) {
    check(sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT));
    return *this;
  }

  // True when a row is ready, false when done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, rc, "step");
  }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::optional<double> opt_double(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(stmt_, col);
  }
  std::vector<uint8_t> blob(int col) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
    return p ? std::vector<uint8_t>(p, p + sqlite3_column_bytes(stmt_, col))
             : std::vector<uint8_t>();
  }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) fail(db_, rc, "bind");
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE ... COMMIT, rolled back when left by an exception.
class WriteTransaction {
 public:
  explicit WriteTransaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~WriteTransaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  void commit() {
    exec(db_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  bool done_ = false;
};

// The id of the workloads row of (hash, shapes, canonical), inserted when missing. Call inside a
// write transaction.
int64_t workload_id(sqlite3* db, const std::string& hash, const std::string& shapes,
                    const std::string& canonical);

}  // namespace tessera::db::sql
