#pragma once
// DietCode selections in the records database (db/records.h), so that a second process builds
// the dynamic kernel from the stored selection instead of tuning again.
//
// A selection is one Record of tuner "dynamic" keyed by the symbolic workload (its shapes text
// carries the size variables' ranges, so another range is another key) on the target
// host_target() + kTargetSuffix (+ ":const<i>" per constant input, + ":search<n>" when search
// mode's n measurements found candidates: a deeper tuning is not answered by a shallower
// one's selection): the suffix keeps these
// records out of RecordsDB::best, which hands out single schedules for static compiles.
// schedule_json holds DynamicSelection::to_json with every schedule in canonical names
// (db/schedule_names.h), so the selection serves any workload with the same key under that
// workload's own names.
#include <optional>

#include "db/records.h"
#include "tune/dynamic/dynamic_kernel.h"
#include "tune/dynamic/workload.h"

namespace tessera::tune::dynamic {

inline constexpr const char* kRecordTuner = "dynamic";
inline constexpr const char* kTargetSuffix = ":dietcode";

db::WorkloadKey selection_key(const DynamicWorkload& workload, int search_trials = 0);
// True when it reached the file (see RecordsDB::put).
bool store_selection(db::RecordsDB& records, const DynamicWorkload& workload,
                     const DynamicSelection& selection, int search_trials = 0);
// The newest stored selection of this workload on this target; nullopt when none, or when the
// stored text does not parse (a warning-free miss: the caller tunes again).
std::optional<DynamicSelection> load_selection(db::RecordsDB& records,
                                               const DynamicWorkload& workload,
                                               int search_trials = 0);

}  // namespace tessera::tune::dynamic
