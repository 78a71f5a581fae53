#pragma once
// Reuse across models and processes: programs tuned earlier (by search, reuse or construct mode,
// in any process, for any model; the rules' schedule where it won) are read back from the records
// database as reuse sources. A record holds the workload's canonical text and its schedule in
// canonical names; both are rebuilt here into a task and a schedule the reuse tuner can start from.
#include <string>
#include <vector>

#include "db/records.h"
#include "schedule/annotation.h"
#include "tune/common.h"
#include "tune/reuse/reuse_condition.h"

namespace tessera::tune::reuse {

struct StoredSource {
  std::string name;                   // "records:<first hash digits>"
  Task task;                          // rebuilt from the record's canonical text
  schedule::KernelSchedule schedule;  // the record's schedule in the rebuilt task's names
  ReuseOperator op;
  double median_ms = 0;  // the record's measured time (0: not measured)
};

// Records on `target`, the best per workload, rebuilt as sources. Records whose text does not
// parse, plan or describe (no anchor loop nest) are skipped: a source is an offer, never a
// requirement.
std::vector<StoredSource> stored_sources(db::RecordsDB& records, const std::string& target);

// The source `user` can reuse (can_reuse) with the nearest extents (the smallest sum of
// |log(extent ratio)|); nullptr when there is none.
const StoredSource* nearest_source(const ReuseOperator& user,
                                   const std::vector<StoredSource>& sources);

}  // namespace tessera::tune::reuse
