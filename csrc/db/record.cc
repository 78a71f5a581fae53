#include "db/record.h"

#include <ctime>

#include "db/schedule_names.h"

// CMake passes the project version to the Python module; the core falls back to this one when it
// is compiled without it. Keep in step with project(VERSION) in CMakeLists.txt.
#ifndef TESSERA_VERSION
#define TESSERA_VERSION "0.1.0"
#endif

namespace tessera::db {

const char* tessera_version() { return TESSERA_VERSION; }

Record make_record(const WorkloadKey& key, const std::string& schedule_json,
                   const std::string& tuner, std::optional<double> median_ms,
                   std::optional<double> gflops, int64_t trials) {
  Record r;
  r.workload_hash = key.hash_hex();
  r.shapes = key.shapes;
  r.target = key.target;
  r.canonical = key.canonical;
  r.schedule_json = schedule_to_canonical(key, schedule_json);
  r.tuner = tuner;
  r.median_ms = median_ms;
  r.gflops = gflops;
  r.trials = trials;
  r.created = static_cast<int64_t>(std::time(nullptr));
  r.version = tessera_version();
  return r;
}

bool record_matches(const Record& r, const WorkloadKey& key) {
  return r.workload_hash == key.hash_hex() && r.shapes == key.shapes && r.target == key.target &&
         r.canonical == key.canonical;
}

bool record_matches(const Record& r, const RecordFilter& f) {
  return (!f.workload_hash || r.workload_hash == *f.workload_hash) &&
         (!f.shapes || r.shapes == *f.shapes) && (!f.target || r.target == *f.target) &&
         (!f.tuner || r.tuner == *f.tuner);
}

bool record_better(const Record& a, const Record& b) {
  if (a.median_ms.has_value() != b.median_ms.has_value()) return a.median_ms.has_value();
  if (a.median_ms && *a.median_ms != *b.median_ms) return *a.median_ms < *b.median_ms;
  return a.created > b.created;
}

}  // namespace tessera::db
