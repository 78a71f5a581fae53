#include "db/sqlite_store.h"

#ifdef TESSERA_HAVE_SQLITE

#include <sqlite3.h>

#include <cstdio>
#include <set>

#include "db/sqlite_stmt.h"

namespace tessera::db {

bool SqliteError::is_busy() const {
  const int primary = code_ & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

bool SqliteError::is_corrupt() const {
  const int primary = code_ & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool SqliteError::is_unwritable() const {
  const int primary = code_ & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM ||
         primary == SQLITE_AUTH;
}

namespace {

using sql::Stmt;
using sql::WriteTransaction;

// Workloads are stored once (their canonical text can be kilobytes); records point at them.
constexpr const char* kCreateSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workloads(
  id INTEGER PRIMARY KEY,
  workload_hash TEXT NOT NULL,
  shapes TEXT NOT NULL,
  canonical TEXT NOT NULL,
  UNIQUE(workload_hash, shapes, canonical));
CREATE TABLE IF NOT EXISTS records(
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target TEXT NOT NULL,
  schedule TEXT NOT NULL,
  tuner TEXT NOT NULL,
  median_ms REAL,
  gflops REAL,
  trials INTEGER NOT NULL,
  created INTEGER NOT NULL,
  version TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS records_by_workload ON records(workload_id, target, median_ms);
)sql";

constexpr const char* kSelectRecord =
    "SELECT r.id, w.workload_hash, w.shapes, r.target, w.canonical, r.schedule, r.tuner, "
    "r.median_ms, r.gflops, r.trials, r.created, r.version "
    "FROM records r JOIN workloads w ON r.workload_id = w.id";

Record read_record(const Stmt& s) {
  Record r;
  r.id = s.int64(0);
  r.workload_hash = s.text(1);
  r.shapes = s.text(2);
  r.target = s.text(3);
  r.canonical = s.text(4);
  r.schedule_json = s.text(5);
  r.tuner = s.text(6);
  r.median_ms = s.opt_double(7);
  r.gflops = s.opt_double(8);
  r.trials = s.int64(9);
  r.created = s.int64(10);
  r.version = s.text(11);
  return r;
}

// "file:<path>?immutable=1" with the characters that URIs reserve percent-encoded.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (c == '%' || c == '?' || c == '#' || c < 0x21 || c > 0x7e) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      uri += buf;
    } else {
      uri += static_cast<char>(c);
    }
  }
  return uri + "?immutable=1";
}

}  // namespace

int64_t sql::workload_id(sqlite3* db, const std::string& hash, const std::string& shapes,
                         const std::string& canonical) {
  Stmt add(db,
           "INSERT OR IGNORE INTO workloads(workload_hash, shapes, canonical) VALUES(?1, ?2, ?3)");
  add.bind(1, hash).bind(2, shapes).bind(3, canonical);
  add.step();
  Stmt find(db,
            "SELECT id FROM workloads WHERE workload_hash = ?1 AND shapes = ?2 AND canonical = ?3");
  find.bind(1, hash).bind(2, shapes).bind(3, canonical);
  if (!find.step()) throw SqliteError(SQLITE_INTERNAL, "workload row vanished");
  return find.int64(0);
}

SqliteStore::SqliteStore(const std::string& path, Access access, int busy_timeout_ms)
    : read_only_(access != Access::kReadWrite) {
  int flags = read_only_ ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::string name = path;
  if (access == Access::kImmutable) {
    flags |= SQLITE_OPEN_URI;
    name = immutable_uri(path);
  }
  const int rc = sqlite3_open_v2(name.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const int code = db_ ? sqlite3_extended_errcode(db_) : rc;
    const std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqliteError(code, "cannot open: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
}

SqliteStore::~SqliteStore() {
  if (db_) sqlite3_close_v2(db_);
}

void SqliteStore::exec(const char* text) { sql::exec(db_, text); }

void SqliteStore::check_integrity() {
  // quick_check reads every page (O(file size), milliseconds for a records file) but skips the
  // index-vs-table cross checks of integrity_check. A file that is not a database at all already
  // fails in prepare with SQLITE_NOTADB.
  Stmt s(db_, "PRAGMA quick_check(1)");
  if (s.step()) {
    const std::string result = s.text(0);
    if (result != "ok") throw SqliteError(SQLITE_CORRUPT, "quick_check: " + result);
  }
}

std::optional<int> SqliteStore::schema_version() {
  Stmt s(db_, "SELECT value FROM meta WHERE key = 'schema_version'");
  if (!s.step()) return std::nullopt;
  const std::string v = s.text(0);
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

SqliteStore::Schema SqliteStore::prepare_schema() {
  // Look before touching anything: a file that is not ours (or is newer) must stay byte for byte
  // as it is, and switching the journal mode rewrites the header.
  std::set<std::string> tables;
  {
    Stmt s(db_, "SELECT name FROM sqlite_master WHERE type = 'table'");
    while (s.step()) tables.insert(s.text(0));
  }
  const bool ours = tables.count("workloads") && tables.count("records");
  const bool fresh = tables.empty();
  if (tables.count("meta")) {
    const std::optional<int> version = schema_version();
    if (!version || !ours) return Schema::kForeign;
    if (*version > kSchemaVersion) return Schema::kNewer;
    // Older versions would be migrated here, one step per version, inside a write transaction.
    // Version 1 is the first, so there is nothing to migrate yet.
  } else if (!fresh) {
    return Schema::kForeign;  // someone else's tables (without ours, or ours without a version)
  }
  if (read_only_) return fresh ? Schema::kMissing : Schema::kReady;

  // A busy database is already being set up (or written) by another process; the mode is a
  // property of the file, so whichever connection switches it does it for all.
  try {
    Stmt wal(db_, "PRAGMA journal_mode=WAL");
    wal.step();
  } catch (const SqliteError& e) {
    if (!e.is_busy()) throw;
  }
  // With WAL, NORMAL only risks the last commits on power loss: fine for a cache of records.
  exec("PRAGMA synchronous=NORMAL");
  if (!fresh) {
    add_search_tables();  // a file of an earlier version of schema 1 gets them now
    return Schema::kReady;
  }
  // Several processes may create the file at once: IF NOT EXISTS and INSERT OR IGNORE make the
  // second creator's transaction a no-op.
  WriteTransaction tx(db_);
  exec(kCreateSchema);
  Stmt v(db_, "INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?)");
  v.bind(1, std::to_string(kSchemaVersion));
  v.step();
  tx.commit();
  add_search_tables();
  return Schema::kReady;
}

std::optional<Record> SqliteStore::best(const WorkloadKey& key, bool* collision) {
  if (collision) *collision = false;
  const std::string hash = key.hash_hex();
  {
    Stmt s(db_, std::string(kSelectRecord) +
                    " WHERE w.workload_hash = ?1 AND w.shapes = ?2 AND w.canonical = ?3"
                    " AND r.target = ?4"
                    " ORDER BY r.median_ms IS NULL, r.median_ms, r.id DESC LIMIT 1");
    s.bind(1, hash).bind(2, key.shapes).bind(3, key.canonical).bind(4, key.target);
    if (s.step()) return read_record(s);
  }
  if (collision) {
    Stmt c(db_,
           "SELECT 1 FROM workloads WHERE workload_hash = ?1 AND shapes = ?2 AND canonical <> ?3"
           " LIMIT 1");
    c.bind(1, hash).bind(2, key.shapes).bind(3, key.canonical);
    *collision = c.step();
  }
  return std::nullopt;
}

void SqliteStore::insert(std::vector<Record>* records) {
  WriteTransaction tx(db_);
  Stmt add_record(db_,
                  "INSERT INTO records(workload_id, target, schedule, tuner, median_ms, gflops,"
                  " trials, created, version) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  for (Record& r : *records) {
    const int64_t workload_id = sql::workload_id(db_, r.workload_hash, r.shapes, r.canonical);
    add_record.reset();
    add_record.bind(1, workload_id).bind(2, r.target).bind(3, r.schedule_json).bind(4, r.tuner);
    add_record.bind(5, r.median_ms).bind(6, r.gflops).bind(7, r.trials).bind(8, r.created);
    add_record.bind(9, r.version);
    add_record.step();
    r.id = sqlite3_last_insert_rowid(db_);
  }
  tx.commit();
}

std::vector<Record> SqliteStore::select(const RecordFilter& f) {
  std::string sql = std::string(kSelectRecord) + " WHERE 1";
  std::vector<std::string> args;
  auto cond = [&](const std::optional<std::string>& v, const char* column) {
    if (!v) return;
    args.push_back(*v);
    sql += std::string(" AND ") + column + " = ?" + std::to_string(args.size());
  };
  cond(f.workload_hash, "w.workload_hash");
  cond(f.shapes, "w.shapes");
  cond(f.target, "r.target");
  cond(f.tuner, "r.tuner");
  sql += " ORDER BY r.id";
  if (f.limit > 0) sql += " LIMIT " + std::to_string(f.limit);
  Stmt s(db_, sql);
  for (size_t i = 0; i < args.size(); ++i) s.bind(static_cast<int>(i + 1), args[i]);
  std::vector<Record> out;
  while (s.step()) out.push_back(read_record(s));
  return out;
}

int64_t SqliteStore::count() {
  Stmt s(db_, "SELECT count(*) FROM records");
  return s.step() ? s.int64(0) : 0;
}

}  // namespace tessera::db

#else  // !TESSERA_HAVE_SQLITE

// Built without SQLite: opening always fails, and RecordsDB keeps its records in memory.
namespace tessera::db {

bool SqliteError::is_busy() const { return false; }
bool SqliteError::is_corrupt() const { return false; }
bool SqliteError::is_unwritable() const { return false; }

SqliteStore::SqliteStore(const std::string&, Access access, int)
    : read_only_(access != Access::kReadWrite) {
  throw SqliteError(-1, "Tessera was built without SQLite");
}
SqliteStore::~SqliteStore() = default;
void SqliteStore::exec(const char*) {}
void SqliteStore::check_integrity() {}
std::optional<int> SqliteStore::schema_version() { return std::nullopt; }
SqliteStore::Schema SqliteStore::prepare_schema() { return Schema::kMissing; }
std::optional<Record> SqliteStore::best(const WorkloadKey&, bool*) { return std::nullopt; }
void SqliteStore::insert(std::vector<Record>*) {}
std::vector<Record> SqliteStore::select(const RecordFilter&) { return {}; }
int64_t SqliteStore::count() { return 0; }

}  // namespace tessera::db

#endif  // TESSERA_HAVE_SQLITE
