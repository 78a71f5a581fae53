#pragma once
// One tuning record: a schedule for one workload on one target, with how well it measured.
#include <cstdint>
#include <optional>
#include <string>

#include "db/workload_key.h"

namespace tessera::db {

struct Record {
  int64_t id = 0;             // row id in the database file; 0 for a record held only in memory
  std::string workload_hash;  // WorkloadKey::hash_hex()
  std::string shapes;         // WorkloadKey::shapes
  std::string target;         // WorkloadKey::target
  std::string canonical;      // WorkloadKey::canonical
  std::string schedule_json;  // KernelSchedule::dump() with canonical names (see make_record)
  std::string tuner;          // default | construct | search | reuse | ...
  std::optional<double> median_ms;  // measured median run time; empty when not measured
  std::optional<double> gflops;     // achieved GFLOP/s; empty when not measured or not known
  int64_t trials = 0;               // candidates the tuner measured or scored to find it
  int64_t created = 0;              // unix time in seconds
  std::string version;              // Tessera version that wrote it
};

// Optional conditions of RecordsDB::all (all given ones must hold). limit 0 = no limit.
struct RecordFilter {
  std::optional<std::string> workload_hash;
  std::optional<std::string> shapes;
  std::optional<std::string> target;
  std::optional<std::string> tuner;
  int64_t limit = 0;
};

// A record for `key` (created now, this version), its schedule translated to canonical names so
// that RecordsDB::best can hand it to any workload with the same key under that workload's names.
Record make_record(const WorkloadKey& key, const std::string& schedule_json,
                   const std::string& tuner, std::optional<double> median_ms = std::nullopt,
                   std::optional<double> gflops = std::nullopt, int64_t trials = 0);

// Whether the record was made for this workload and target (all key fields equal).
bool record_matches(const Record& r, const WorkloadKey& key);
bool record_matches(const Record& r, const RecordFilter& f);

// The order RecordsDB::best picks by: measured before unmeasured, then faster, then newer.
bool record_better(const Record& a, const Record& b);

// Version string stored with new records.
const char* tessera_version();

}  // namespace tessera::db
