#pragma once
// One measured tuning candidate, stored as it happens: the search's log in the records database.
// A search killed half-way resumes from its measurements instead of repeating them, and the log
// says what the search tried, in order, after the fact.
//
// Like a record, a measurement is filed under its workload key and holds its schedule in
// canonical names (schedule_names.h), so it serves any workload with the same key.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/workload_key.h"

namespace tessera::db {

struct Measurement {
  int64_t id = 0;             // row id in the database file; 0 for one held only in memory
  std::string workload_hash;  // WorkloadKey::hash_hex()
  std::string shapes;         // WorkloadKey::shapes
  std::string target;         // WorkloadKey::target
  std::string canonical;      // WorkloadKey::canonical
  // KernelSchedule::dump(): canonical names in the file, the workload's names when returned by
  // RecordsDB::measurements.
  std::string schedule_json;
  std::string tuner;                // "search", ...
  bool ok = false;                  // built, verified against the default schedule, timed
  std::string error;                // why not ok
  std::optional<double> median_ms;  // empty when not ok
  uint64_t seed = 0;                // the tuner's random seed
  int round = 0;                    // the tuner's round that measured it
  int trial = 0;                    // its position among the tuner's measurements (from 0)
  double created = 0;               // unix time in seconds
  std::string version;              // Tessera version that wrote it
};

// A measurement of `schedule_json` (in the names of the workload `key` was made from) for `key`,
// made now by this version; the schedule is translated to canonical names.
Measurement make_measurement(const WorkloadKey& key, const std::string& schedule_json,
                             const std::string& tuner, bool ok, const std::string& error,
                             std::optional<double> median_ms, uint64_t seed, int round, int trial);

// Whether the measurement was made for this workload and target (all key fields equal) and, when
// `tuner` is not empty, by that tuner.
bool measurement_matches(const Measurement& m, const WorkloadKey& key, const std::string& tuner);

}  // namespace tessera::db
