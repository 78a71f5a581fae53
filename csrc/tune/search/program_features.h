#pragma once
// The learned cost model's input for one program of a task: the store rows of its lowered loop
// IR (cost::extract_features) and the program row with Gensor's analytic prior (the estimated
// speedup over the task's rules schedule; cost/features.h, columns 143-144). Search mode, its
// training set and the held-out evaluation all featurize through this, so a model trained in one
// ranks in the others.
#include "cost/features.h"
#include "cost/memory_levels.h"
#include "loop/stmt.h"
#include "schedule/annotation.h"
#include "tune/common.h"
#include "tune/search/space.h"

namespace tessera::tune::search {

class ProgramFeaturizer {
 public:
  // `space` (of `task`) must outlive the featurizer. work: the store rows' normaliser (the
  // task's iteration points; 1 for the unnormalised baseline).
  ProgramFeaturizer(const Task& task, const SearchSpace& space, cost::MemoryHierarchy hw,
                    double work);

  // `lowered`: `s` lowered (SearchSpace::try_lower).
  cost::ProgramFeatures operator()(const schedule::KernelSchedule& s,
                                   const loop::LoweredFunc& lowered) const;

 private:
  const SearchSpace& space_;
  cost::MemoryHierarchy hw_;
  int threads_;
  double work_;
  double rules_ms_;  // analytic estimate of the task's rules schedule; <= 0: none
};

}  // namespace tessera::tune::search
