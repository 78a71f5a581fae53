#include "compiler/search_records.h"

#include <ctime>
#include <exception>

#include "cost/features.h"

namespace tessera::compiler {

db::Measurement search_measurement(const db::WorkloadKey& key,
                                   const schedule::KernelSchedule& schedule,
                                   const tune::CandidateResult& result, uint64_t seed, int round,
                                   int trial) {
  return db::make_measurement(key, schedule.dump(), "search", result.ok, result.error,
                              result.median_ms, seed, round, trial);
}

std::vector<tune::search::Trial> logged_search_trials(db::RecordsDB& records,
                                                      const db::WorkloadKey& key,
                                                      const tune::Task& task) {
  std::vector<tune::search::Trial> out;
  for (const db::Measurement& m : records.measurements(key, "search")) {
    tune::search::Trial t;
    try {
      t.schedule = schedule::KernelSchedule::parse(m.schedule_json);
    } catch (const std::exception&) {
      continue;
    }
    if (t.schedule.stages.size() != task.plan_for(t.schedule.plan).stages.size()) continue;
    t.result.ok = m.ok && m.median_ms && *m.median_ms > 0;
    t.result.error = m.error;
    t.result.median_ms = t.result.ok ? *m.median_ms : 0;
    t.round = m.round;
    out.push_back(std::move(t));
  }
  return out;
}

bool save_cost_model(db::RecordsDB& records, const cost::XGBModel& model, const std::string& target,
                     int64_t samples) {
  db::ModelBlob blob;
  blob.name = model.name();
  blob.target = target;
  blob.feature_version = cost::kFeatureVersion;
  try {
    blob.bytes = model.save();
  } catch (const std::exception&) {
    return false;  // untrained, or XGBoost not compiled in
  }
  blob.samples = samples;
  blob.created = static_cast<int64_t>(std::time(nullptr));
  blob.version = db::tessera_version();
  return records.put_model(blob);
}

bool load_cost_model(db::RecordsDB& records, cost::XGBModel& model, const std::string& target) {
  if (!model.available()) return false;
  const std::optional<db::ModelBlob> blob =
      records.model(model.name(), target, cost::kFeatureVersion);
  if (!blob || blob->bytes.empty()) return false;
  try {
    model.load(blob->bytes);
  } catch (const std::exception&) {
    return false;  // a damaged blob: the model learns afresh
  }
  return true;
}

}  // namespace tessera::compiler
