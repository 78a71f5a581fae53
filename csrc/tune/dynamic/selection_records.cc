#include "tune/dynamic/selection_records.h"

#include "db/schedule_names.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

using util::Json;

namespace {

// `selection` as JSON with each schedule passed through `translate` (to or from canonical names).
template <typename Translate>
Json translated(Json j, const Translate& translate) {
  for (Json& s : j["schedules"].as_array()) s = Json::parse(translate(s.dump()));
  return j;
}

}  // namespace

db::WorkloadKey selection_key(const DynamicWorkload& workload, int search_trials) {
  // Constant inputs change what wins (a micro-kernel that packs a weight pays it once, not per
  // call), so a selection made with other ones is not reused.
  std::string suffix;
  for (int i : workload.constant_inputs()) suffix += ":const" + std::to_string(i);
  if (search_trials > 0) suffix += ":search" + std::to_string(search_trials);
  return db::make_workload_key(workload.outputs(), workload.inputs(),
                               db::host_target() + kTargetSuffix + suffix);
}

bool store_selection(db::RecordsDB& records, const DynamicWorkload& workload,
                     const DynamicSelection& selection, int search_trials) {
  const db::WorkloadKey key = selection_key(workload, search_trials);
  const Json j = translated(
      selection.to_json(), [&](const std::string& s) { return db::schedule_to_canonical(key, s); });
  // make_record leaves text that is not one schedule as it is: the selection was made canonical
  // schedule by schedule above.
  return records.put(db::make_record(key, j.dump(), kRecordTuner, std::nullopt, std::nullopt,
                                     selection.candidates));
}

std::optional<DynamicSelection> load_selection(db::RecordsDB& records,
                                               const DynamicWorkload& workload, int search_trials) {
  const db::WorkloadKey key = selection_key(workload, search_trials);
  db::RecordFilter filter;
  filter.workload_hash = key.hash_hex();
  filter.shapes = key.shapes;
  filter.target = key.target;
  filter.tuner = std::string(kRecordTuner);
  std::optional<DynamicSelection> newest;
  for (const db::Record& r : records.all(filter)) {  // oldest first: the last that parses wins
    if (!db::record_matches(r, key)) continue;       // a hash collision
    try {
      Json j = translated(Json::parse(r.schedule_json), [&](const std::string& s) {
        return db::schedule_from_canonical(key, s);
      });
      newest = DynamicSelection::from_json(j);
    } catch (const std::exception&) {
      continue;  // written by another version or damaged: not a selection this build can use
    }
  }
  return newest;
}

}  // namespace tessera::tune::dynamic
