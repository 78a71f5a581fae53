#include "tune/search/analytic_estimate.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "tune/gensor/model.h"

namespace tessera::tune::search {

double analytic_estimate_ms(const SearchSpace& space, const cost::MemoryHierarchy& hw, int threads,
                            const schedule::KernelSchedule& s) {
  gensor::ModelOptions mo;
  mo.cores = std::max(1, threads);
  const gensor::AnalyticModel model(hw, mo);
  double ms = 0;
  try {
    const std::vector<StageChoices>& stages = space.stages_of(s);
    for (size_t i = 0; i < stages.size(); ++i) {
      const StageChoices& c = stages[i];
      const bool cross = s.stages[i].sketch == schedule::Sketch::kCrossLaneReduction;
      ms += model.predict(cross ? c.cross_lane_space : c.tiling_space, s.stages[i]).total_ms;
    }
  } catch (const std::exception&) {
    return -1;
  }
  return std::isfinite(ms) && ms > 0 ? ms : -1;
}

}  // namespace tessera::tune::search
