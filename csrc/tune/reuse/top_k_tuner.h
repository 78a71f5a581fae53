#pragma once
// Selective Tuning's TopK, the baseline ETO's paper compares its selection with: an operator of
// a group tries the best few programs of the group's searched operator as they are (no narrowed
// search around them) and keeps the fastest. A program is transplanted whole: its plan choices
// and every stage's numbers, packed operands renamed by position; cache tiles past the user's
// extents run as edge tiles. One batch of measurements, one trial per program that fits the
// user's space; the rules' schedule is measured only when none of them verifies.
#include <vector>

#include "tune/common.h"
#include "tune/reuse/reuse_tuner.h"

namespace tessera::tune::reuse {

// `programs`: schedules of `source`, fastest first (distinct). User and source must be of one
// kind (same_kind). Throws tessera::Error when neither a program nor the rules' schedule verifies.
ReuseTuneResult top_k_tune(const Task& user, const Task& source,
                           const std::vector<schedule::KernelSchedule>& programs,
                           const MeasureConfig& measure = {});

}  // namespace tessera::tune::reuse
