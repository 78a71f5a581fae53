#pragma once
// The SQLite file behind RecordsDB: schema, integrity check and queries. Every failure throws
// SqliteError with SQLite's result code; the policy (wait, repair, fall back to memory, warn)
// lives in RecordsDB, which never lets an error reach the compile path.
//
// Concurrency: WAL journal (readers never wait for a writer), a busy timeout for writers, and
// every write in one BEGIN IMMEDIATE transaction (takes the write lock up front, so two writers
// queue on the busy timeout instead of failing on a read-to-write upgrade).
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "db/measurement.h"
#include "db/model_blob.h"
#include "db/record.h"

struct sqlite3;

namespace tessera::db {

class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  int code() const { return code_; }  // extended result code
  bool is_busy() const;               // another connection holds a lock past the timeout
  bool is_corrupt() const;            // the file is damaged or not a database
  bool is_unwritable() const;         // read-only file or directory, cannot create the file

 private:
  int code_;
};

// Version of the schema this code writes. Files with a newer version are not touched.
constexpr int kSchemaVersion = 1;

class SqliteStore {
 public:
  enum class Schema {
    kReady,    // tables present (created if needed), this version
    kNewer,    // written by a newer Tessera: leave it alone
    kForeign,  // a SQLite file with tables that are not Tessera's records
    kMissing,  // no tables and the file is opened read-only
  };

  enum class Access {
    kReadWrite,  // created when missing
    kReadOnly,   // shares the file's locks with writers (needs a writable directory for WAL)
    kImmutable,  // no locks and no WAL index: for a file in a read-only place nobody writes
  };

  // Opens the file (creating nothing but the file itself).
  SqliteStore(const std::string& path, Access access, int busy_timeout_ms);
  ~SqliteStore();
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;

  // Throws SqliteError(SQLITE_CORRUPT) when PRAGMA quick_check finds damage.
  void check_integrity();
  // Switches to WAL and creates the tables (or checks their version).
  Schema prepare_schema();

  // The best record of `key`. *collision is set when records with the same hash and shapes but
  // another canonical text exist (a hash collision that the text comparison resolved).
  std::optional<Record> best(const WorkloadKey& key, bool* collision);
  // Inserts all records in one transaction (all or none); sets their ids.
  void insert(std::vector<Record>* records);
  std::vector<Record> select(const RecordFilter& filter);
  int64_t count();

  // Search measurements (db/measurement.h; tables in sqlite_search_tables.cc). Inserts all in
  // one transaction (all or none) and sets their ids.
  void insert_measurements(std::vector<Measurement>* measurements);
  // Those of `key` (and of `tuner` when not empty), oldest first, schedules in canonical names.
  std::vector<Measurement> select_measurements(const WorkloadKey& key, const std::string& tuner);
  int64_t count_measurements();
  // Saved cost models: put replaces the one with the same name, target and feature version.
  void put_model(const ModelBlob& model);
  std::optional<ModelBlob> get_model(const std::string& name, const std::string& target,
                                     int feature_version);

  // Drops the handle without closing it: after fork() the child must not close (and thereby
  // unlock) what its parent's connection holds.
  void abandon() { db_ = nullptr; }
  bool read_only() const { return read_only_; }

 private:
  void exec(const char* text);
  std::optional<int> schema_version();
  bool has_table(const char* name);
  // Creates the search tables when missing. Files made before they existed get them here; when
  // another process holds the write lock the first write creates them instead.
  void add_search_tables();

  sqlite3* db_ = nullptr;
  bool read_only_;
};

}  // namespace tessera::db
