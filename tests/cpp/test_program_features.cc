// Search mode's program features: the store rows of the lowered program and the program row,
// which carries Gensor's analytic estimate as a speedup over the task's rules schedule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "const_dims.h"
#include "cost/features.h"
#include "ops/ops.h"
#include "synthetic_hw.h"
#include "tune/search/analytic_estimate.h"
#include "tune/search/program_features.h"

namespace tessera::tune::search {
namespace {

TEST(ProgramFeaturizer, ProgramRowCarriesTheAnalyticSpeedupOverTheRules) {
  ir::Tensor a = ir::placeholder("A", testing::dims({96, 64}));
  ir::Tensor b = ir::placeholder("B", testing::dims({64, 80}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  SearchSpace space(task);
  const cost::MemoryHierarchy hw = testing::synthetic_hw();
  const ProgramFeaturizer featurize(task, space, hw, task.iteration_points());
  const double rules_ms =
      analytic_estimate_ms(space, hw, task.target.num_threads, task.default_schedule());
  ASSERT_GT(rules_ms, 0);

  std::mt19937_64 rng(3);
  std::set<float> speedups;
  for (int i = 0; i < 20; ++i) {
    const schedule::KernelSchedule s = i == 0 ? task.default_schedule() : space.sample(rng);
    const loop::LoweredFunc f = *space.try_lower(s);
    const cost::ProgramFeatures stores = cost::extract_features(f, task.iteration_points());
    const cost::ProgramFeatures pf = featurize(space, s, f);
    // The store rows unchanged, and one more row.
    ASSERT_EQ(pf.num_rows, stores.num_rows + 1);
    for (size_t k = 0; k < stores.values.size(); ++k) ASSERT_EQ(pf.values[k], stores.values[k]);
    for (int r = 0; r < stores.num_rows; ++r) {
      EXPECT_EQ(pf.row(r)[cost::kFeatureProgramRow], 0.0f);
      EXPECT_EQ(pf.row(r)[cost::kFeatureAnalyticSpeedup], 0.0f);
    }
    const float* program = pf.row(pf.num_rows - 1);
    EXPECT_EQ(program[cost::kFeatureProgramRow], 1.0f);
    for (int k = 0; k < cost::kFeatureProgramRow; ++k) EXPECT_EQ(program[k], 0.0f) << k;
    const double ms = analytic_estimate_ms(space, hw, task.target.num_threads, s);
    ASSERT_GT(ms, 0);
    EXPECT_NEAR(program[cost::kFeatureAnalyticSpeedup], std::log2(rules_ms / ms), 1e-5);
    if (i == 0) {
      EXPECT_EQ(program[cost::kFeatureAnalyticSpeedup], 0.0f);
    }
    speedups.insert(program[cost::kFeatureAnalyticSpeedup]);
  }
  // Random schedules differ in their estimates, some slower than the rules' and some not.
  EXPECT_GT(speedups.size(), 10u);
  EXPECT_LT(*speedups.begin(), 0.0f);
}

}  // namespace
}  // namespace tessera::tune::search
