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

// Holds no reference to the space (a TaskSearcher owns both and may be moved): each call is
// given the space of the task it was made for.
class ProgramFeaturizer {
 public:
  // `space`: `task`'s search space. work: the store rows' normaliser (the task's iteration
  // points; 1 for the unnormalised baseline).
  ProgramFeaturizer(const Task& task, const SearchSpace& space, cost::MemoryHierarchy hw,
                    double work);

  // `space`: the task's space, as given to the constructor; `lowered`: `s` lowered
  // (SearchSpace::try_lower).
  cost::ProgramFeatures operator()(const SearchSpace& space, const schedule::KernelSchedule& s,
                                   const loop::LoweredFunc& lowered) const;

  // The memory hierarchy the analytic estimates assume (the searcher's ranking uses it too).
  const cost::MemoryHierarchy& hardware() const { return hw_; }

 private:
  cost::MemoryHierarchy hw_;
  int threads_;
  double work_;
  double rules_ms_;  // analytic estimate of the task's rules schedule; <= 0: none
};

}  // namespace tessera::tune::search
