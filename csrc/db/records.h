#pragma once
// The tuning-records database: compiled kernels' schedules, keyed by workload and target, kept in
// a SQLite file shared by every process of the user, so that a second process compiling the same
// model (or another model with the same operators) takes schedules from records instead of
// tuning and measuring again.
//
// Search mode also logs every measured candidate here (db/measurement.h: a killed search resumes
// from them) and saves its learned cost model (db/model_blob.h); both follow the rules below.
//
// Location: $TESSERA_RECORDS_DB, else <tessera_cache_dir()>/records.db (~/.cache/tessera), or
// any path given to open(); ":memory:" keeps records in this process only.
//
// Nothing here throws into the compile path. Every problem degrades to "no record" plus one clear
// warning on stderr:
//   - several processes: WAL journal and a busy timeout; writes are short transactions;
//   - a damaged file (garbage, truncated): found at open by quick_check, moved aside to
//     records.db.corrupt-<time>, and a fresh database is started;
//   - a file locked past the busy timeout: new records are held in memory (still found by this
//     process) and written with the next put or flush() once the lock is gone; lookups go on
//     reading (WAL readers do not wait for a writer) unless reading is locked too, then they miss.
//     After a timeout the locked kind of access is not tried for retry_after_ms, so a long
//     compile does not wait once per kernel;
//   - a read-only or missing directory: records are kept in memory for this process (an existing
//     read-only file is still read);
//   - a file written by a newer Tessera or that is not a records file: left untouched, memory only.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/measurement.h"
#include "db/model_blob.h"
#include "db/record.h"
#include "db/workload_key.h"

namespace tessera::db {

struct RecordsDBOptions {
  int busy_timeout_ms = 3000;  // longest wait for another process's lock, per operation
  int retry_after_ms = 10000;  // after a lock timeout, skip the file this long
  bool quick_check = true;     // check the file for damage when opening it
  // Warnings go to stderr as they happen. A caller with its own log (the torch.compile backend)
  // turns this off and collects them with take_warnings() instead.
  bool warn_to_stderr = true;
};

// Counters of one RecordsDB object (this process), for tests, logs and `explain`.
struct RecordsDBStats {
  int64_t lookups = 0;
  int64_t hits = 0;
  int64_t collisions = 0;  // lookups that found the hash but not the canonical text
  int64_t puts = 0;
  int64_t put_deferred = 0;  // puts held in memory because the file was locked or unwritable
  int64_t lock_timeouts = 0;
  int64_t repairs = 0;  // damaged files moved aside by this object
};

class RecordsDB {
 public:
  // Where records live: "disk" (read-write file), "read-only" (file read, new records in
  // memory) or "memory".
  enum class Mode { kDisk, kReadOnly, kMemory };

  // Opens (creating when needed) the database at `path`; "" means default_path(). Never throws.
  static RecordsDB open(const std::string& path = "", const RecordsDBOptions& options = {});
  static std::string default_path();

  RecordsDB(RecordsDB&&) noexcept;
  RecordsDB& operator=(RecordsDB&&) noexcept;
  ~RecordsDB();  // writes records held back by a lock, if the lock is gone by then

  // The best record of this workload on its target (measured before unmeasured, then fastest),
  // with the schedule translated to the names of the workload `key` was made from.
  std::optional<Record> best(const WorkloadKey& key);
  // Stores a record (see make_record). True when it reached the file, false when it is kept in
  // memory only (it is still returned by best/all of this object).
  bool put(const Record& record);
  // Records (file and memory), oldest first.
  std::vector<Record> all(const RecordFilter& filter = {});
  int64_t count();
  // Writes records (measurements, models) held in memory because of a lock; true when none is
  // left pending.
  bool flush();

  // Search measurements (db/measurement.h), stored as they happen: all in one transaction. True
  // when they reached the file; otherwise they are held as records are (see above).
  bool put_measurements(const std::vector<Measurement>& measurements);
  bool put_measurement(const Measurement& measurement) { return put_measurements({measurement}); }
  // Those of this workload on its target (of `tuner` when not empty), oldest first, with their
  // schedules translated to the names of the workload `key` was made from.
  std::vector<Measurement> measurements(const WorkloadKey& key, const std::string& tuner = "");
  int64_t count_measurements();

  // A learned cost model (db/model_blob.h): put replaces the one with the same name, target and
  // feature version; model() finds it (file or memory).
  bool put_model(const ModelBlob& model);
  std::optional<ModelBlob> model(const std::string& name, const std::string& target,
                                 int feature_version);

  const std::string& path() const;
  Mode mode() const;
  RecordsDBStats stats() const;
  // Warnings issued since the last call (oldest first; at most the 32 newest are kept), whether
  // or not they were also printed.
  std::vector<std::string> take_warnings();

 private:
  struct Impl;
  explicit RecordsDB(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

const char* mode_name(RecordsDB::Mode mode);

}  // namespace tessera::db
