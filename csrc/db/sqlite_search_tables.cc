// The search tables of the records file: every measured candidate (measurements) and the saved
// cost models (cost_models). Both were added to schema version 1 without changing it: they are
// created when missing, and a Tessera that does not know them ignores them.
#include "db/sqlite_store.h"

#ifdef TESSERA_HAVE_SQLITE

#include "db/sqlite_stmt.h"

namespace tessera::db {

namespace {

using sql::Stmt;
using sql::WriteTransaction;

// Measurements point at the workloads table, as records do. The seed is stored as its 64 bits
// (SQLite integers are signed).
constexpr const char* kCreateSearchTables = R"sql(
CREATE TABLE IF NOT EXISTS measurements(
  id INTEGER PRIMARY KEY,
  workload_id INTEGER NOT NULL REFERENCES workloads(id),
  target TEXT NOT NULL,
  schedule TEXT NOT NULL,
  tuner TEXT NOT NULL,
  ok INTEGER NOT NULL,
  error TEXT NOT NULL,
  median_ms REAL,
  seed INTEGER NOT NULL,
  round INTEGER NOT NULL,
  trial INTEGER NOT NULL,
  created REAL NOT NULL,
  version TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_by_workload ON measurements(workload_id, target, tuner);
CREATE TABLE IF NOT EXISTS cost_models(
  name TEXT NOT NULL,
  target TEXT NOT NULL,
  feature_version INTEGER NOT NULL,
  model BLOB NOT NULL,
  samples INTEGER NOT NULL,
  created INTEGER NOT NULL,
  version TEXT NOT NULL,
  PRIMARY KEY(name, target, feature_version));
)sql";

Measurement read_measurement(const Stmt& s) {
  Measurement m;
  m.id = s.int64(0);
  m.workload_hash = s.text(1);
  m.shapes = s.text(2);
  m.target = s.text(3);
  m.canonical = s.text(4);
  m.schedule_json = s.text(5);
  m.tuner = s.text(6);
  m.ok = s.int64(7) != 0;
  m.error = s.text(8);
  m.median_ms = s.opt_double(9);
  m.seed = static_cast<uint64_t>(s.int64(10));
  m.round = static_cast<int>(s.int64(11));
  m.trial = static_cast<int>(s.int64(12));
  m.created = s.real(13);
  m.version = s.text(14);
  return m;
}

}  // namespace

bool SqliteStore::has_table(const char* name) {
  Stmt s(db_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1");
  s.bind(1, std::string(name));
  return s.step();
}

void SqliteStore::add_search_tables() {
  if (has_table("measurements") && has_table("cost_models")) return;
  try {
    WriteTransaction tx(db_);
    exec(kCreateSearchTables);
    tx.commit();
  } catch (const SqliteError& e) {
    if (!e.is_busy()) throw;
  }
}

void SqliteStore::insert_measurements(std::vector<Measurement>* measurements) {
  WriteTransaction tx(db_);
  exec(kCreateSearchTables);  // no-op when present; here when add_search_tables met a lock
  Stmt add(db_,
           "INSERT INTO measurements(workload_id, target, schedule, tuner, ok, error, median_ms,"
           " seed, round, trial, created, version)"
           " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  for (Measurement& m : *measurements) {
    const int64_t workload = sql::workload_id(db_, m.workload_hash, m.shapes, m.canonical);
    add.reset();
    add.bind(1, workload).bind(2, m.target).bind(3, m.schedule_json).bind(4, m.tuner);
    add.bind(5, int64_t{m.ok}).bind(6, m.error).bind(7, m.median_ms);
    add.bind(8, static_cast<int64_t>(m.seed)).bind(9, int64_t{m.round}).bind(10, int64_t{m.trial});
    add.bind(11, m.created).bind(12, m.version);
    add.step();
    m.id = sqlite3_last_insert_rowid(db_);
  }
  tx.commit();
}

std::vector<Measurement> SqliteStore::select_measurements(const WorkloadKey& key,
                                                          const std::string& tuner) {
  if (!has_table("measurements")) return {};
  Stmt s(db_,
         "SELECT m.id, w.workload_hash, w.shapes, m.target, w.canonical, m.schedule, m.tuner,"
         " m.ok, m.error, m.median_ms, m.seed, m.round, m.trial, m.created, m.version"
         " FROM measurements m JOIN workloads w ON m.workload_id = w.id"
         " WHERE w.workload_hash = ?1 AND w.shapes = ?2 AND w.canonical = ?3 AND m.target = ?4"
         " AND (?5 = '' OR m.tuner = ?5) ORDER BY m.id");
  s.bind(1, key.hash_hex()).bind(2, key.shapes).bind(3, key.canonical).bind(4, key.target);
  s.bind(5, tuner);
  std::vector<Measurement> out;
  while (s.step()) out.push_back(read_measurement(s));
  return out;
}

int64_t SqliteStore::count_measurements() {
  if (!has_table("measurements")) return 0;
  Stmt s(db_, "SELECT count(*) FROM measurements");
  return s.step() ? s.int64(0) : 0;
}

void SqliteStore::put_model(const ModelBlob& model) {
  WriteTransaction tx(db_);
  exec(kCreateSearchTables);
  Stmt put(db_,
           "INSERT OR REPLACE INTO cost_models(name, target, feature_version, model, samples,"
           " created, version) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  put.bind(1, model.name).bind(2, model.target).bind(3, int64_t{model.feature_version});
  put.bind(4, model.bytes).bind(5, model.samples).bind(6, model.created).bind(7, model.version);
  put.step();
  tx.commit();
}

std::optional<ModelBlob> SqliteStore::get_model(const std::string& name, const std::string& target,
                                                int feature_version) {
  if (!has_table("cost_models")) return std::nullopt;
  Stmt s(db_,
         "SELECT model, samples, created, version FROM cost_models"
         " WHERE name = ?1 AND target = ?2 AND feature_version = ?3");
  s.bind(1, name).bind(2, target).bind(3, int64_t{feature_version});
  if (!s.step()) return std::nullopt;
  ModelBlob m;
  m.name = name;
  m.target = target;
  m.feature_version = feature_version;
  m.bytes = s.blob(0);
  m.samples = s.int64(1);
  m.created = s.int64(2);
  m.version = s.text(3);
  return m;
}

}  // namespace tessera::db

#else  // !TESSERA_HAVE_SQLITE

// Built without SQLite: the store never opens (see sqlite_store.cc), so these are never reached.
namespace tessera::db {

bool SqliteStore::has_table(const char*) { return false; }
void SqliteStore::add_search_tables() {}
void SqliteStore::insert_measurements(std::vector<Measurement>*) {}
std::vector<Measurement> SqliteStore::select_measurements(const WorkloadKey&, const std::string&) {
  return {};
}
int64_t SqliteStore::count_measurements() { return 0; }
void SqliteStore::put_model(const ModelBlob&) {}
std::optional<ModelBlob> SqliteStore::get_model(const std::string&, const std::string&, int) {
  return std::nullopt;
}

}  // namespace tessera::db

#endif  // TESSERA_HAVE_SQLITE
