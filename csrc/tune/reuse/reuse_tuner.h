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
// Each round's best (including the round's incumbent) goes into the next. Finally the fastest few
// over all B are timed again together with the rules' schedule, in one batch of longer rounds,
// and the fastest there is returned (the rules' schedule when it wins). Other stages than the
// anchor keep the rules' annotation of the source's plan.
// Within the rounds a schedule measured once is not measured again (its first time is kept).
#include "tune/common.h"
#include "tune/reuse/reuse_space.h"

namespace tessera::tune::reuse {

struct ReuseTunerOptions {
  MeasureConfig measure;
  // Task counts tried, nearest the range's centre (geometric mean) first; 0: every one in range.
  int max_task_counts = 0;
};

// A schedule of the final race and its time there (-1: it failed to run).
struct RacedSchedule {
  schedule::KernelSchedule schedule;
  double ms = -1;
};

struct ReuseTuneResult {
  schedule::KernelSchedule best;
  double best_ms = 0;         // its time in the final race (in its round when no finalist ran)
  int trials = 0;             // distinct schedules measured
  int task_counts_tried = 0;  // B values whose first round had a valid candidate
  FeatureRanges ranges;
  ReuseFeatures source_features;
  // The final race: the fastest few of the rounds, then the rules' schedule (last).
  std::vector<RacedSchedule> race;
};

// `source_schedule` is a schedule of `source` whose anchor stage is a multi-level tiling; user
// and source must satisfy can_reuse. Throws tessera::Error otherwise, or when no candidate (nor
// the rules' schedule of the source's plan) builds and verifies.
ReuseTuneResult reuse_tune(const Task& user, const Task& source,
                           const schedule::KernelSchedule& source_schedule,
                           const ReuseTunerOptions& options = {});

}  // namespace tessera::tune::reuse
