#include "tune/search/program_features.h"

#include <cmath>
#include <limits>

#include "tune/search/analytic_estimate.h"

namespace tessera::tune::search {

ProgramFeaturizer::ProgramFeaturizer(const Task& task, const SearchSpace& space,
                                     cost::MemoryHierarchy hw, double work)
    : hw_(std::move(hw)),
      threads_(task.target.num_threads),
      work_(work),
      rules_ms_(analytic_estimate_ms(space, hw_, threads_, task.default_schedule())) {}

cost::ProgramFeatures ProgramFeaturizer::operator()(const SearchSpace& space,
                                                    const schedule::KernelSchedule& s,
                                                    const loop::LoweredFunc& lowered) const {
  cost::ProgramFeatures f = cost::extract_features(lowered, work_);
  const double ms = rules_ms_ > 0 ? analytic_estimate_ms(space, hw_, threads_, s) : -1;
  cost::append_program_row(
      f, ms > 0 ? std::log2(rules_ms_ / ms) : std::numeric_limits<double>::quiet_NaN());
  return f;
}

}  // namespace tessera::tune::search
