#pragma once
// Gensor's analytic time estimate of a whole program of search mode's space: the sum over its
// stages of AnalyticModel::predict on the stage's space (the cross-lane or tiling view, as the
// stage's sketch says). Search ranks with it until the learned model has enough samples, and the
// learned model reads it as a prior (cost/features.h, the program row).
#include "cost/memory_levels.h"
#include "schedule/annotation.h"
#include "tune/search/space.h"

namespace tessera::tune::search {

// Predicted milliseconds of `s` on `threads` threads of `hw`; <= 0 when the model cannot
// estimate it (a plan the space does not offer, or an estimate that is not finite).
double analytic_estimate_ms(const SearchSpace& space, const cost::MemoryHierarchy& hw, int threads,
                            const schedule::KernelSchedule& s);

}  // namespace tessera::tune::search
