#pragma once
// ETO's reuse-based tuner (Alg. 1) on the CPU: tunes the user operator from the source operator's
// tuned schedule by measuring only candidates whose features stay in the Eq. 1-3 ranges around
// the source's (reuse_space.h). The source's sketch is kept; the anchor stage's numbers are
// searched in rounds, per task count B in its range (nearest the range's centre first):
//   1. BShape = GetBShape(B), LShape = GetLShape (per-task panel bytes close to the source's),
//      TShape = GetTShape(T) for every register-tile count T in its range: measured, best kept;
//   2. every LShape (one reduce axis split) with M in its range, with the best TShape;
//   3. every other inner-reduce unroll depth (powers of two up to search mode's limit);
//   4. packing toggled per packable operand, and every narrower vector width.
// Each round's best (including the round's incumbent) goes into the next; the best over all B,
// or the rules' schedule when that measured faster, is returned. Other stages than the anchor keep the rules' annotation of the source's plan.
// A schedule measured once is not measured again (its first time is kept).
#include "tune/common.h"
#include "tune/reuse/reuse_space.h"

namespace tessera::tune::reuse {

struct ReuseTunerOptions {
  MeasureConfig measure;
  // Task counts tried, nearest the range's centre (geometric mean) first; 0: every one in range.
  int max_task_counts = 0;
};

struct ReuseTuneResult {
  schedule::KernelSchedule best;
  double best_ms = 0;
  int trials = 0;             // distinct schedules measured
  int task_counts_tried = 0;  // B values whose first round had a valid candidate
  FeatureRanges ranges;
  ReuseFeatures source_features;
};

// `source_schedule` is a schedule of `source` whose anchor stage is a multi-level tiling; user
// and source must satisfy can_reuse. Throws tessera::Error otherwise, or when no candidate (nor
// the rules' schedule of the source's plan) builds and verifies.
ReuseTuneResult reuse_tune(const Task& user, const Task& source,
                           const schedule::KernelSchedule& source_schedule,
                           const ReuseTunerOptions& options = {});

}  // namespace tessera::tune::reuse
