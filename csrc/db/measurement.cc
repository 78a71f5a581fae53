#include "db/measurement.h"

#include <chrono>

#include "db/record.h"
#include "db/schedule_names.h"

namespace tessera::db {

Measurement make_measurement(const WorkloadKey& key, const std::string& schedule_json,
                             const std::string& tuner, bool ok, const std::string& error,
                             std::optional<double> median_ms, uint64_t seed, int round, int trial) {
  Measurement m;
  m.workload_hash = key.hash_hex();
  m.shapes = key.shapes;
  m.target = key.target;
  m.canonical = key.canonical;
  m.schedule_json = schedule_to_canonical(key, schedule_json);
  m.tuner = tuner;
  m.ok = ok;
  m.error = error;
  m.median_ms = ok ? median_ms : std::nullopt;
  m.seed = seed;
  m.round = round;
  m.trial = trial;
  m.created =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  m.version = tessera_version();
  return m;
}

bool measurement_matches(const Measurement& m, const WorkloadKey& key, const std::string& tuner) {
  return m.workload_hash == key.hash_hex() && m.shapes == key.shapes && m.target == key.target &&
         m.canonical == key.canonical && (tuner.empty() || m.tuner == tuner);
}

}  // namespace tessera::db
