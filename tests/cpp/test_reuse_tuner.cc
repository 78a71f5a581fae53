// ETO's reuse tuner: the Eq. 1-3 ranges around a source program, the candidate shapes, and the
// hierarchical search (Alg. 1) run end to end on a small matmul pair with real measurements.
#include <gtest/gtest.h>

#include "const_dims.h"
#include "ops/ops.h"
#include "tune/gensor/stage_space.h"
#include "tune/reuse/reuse_tuner.h"
#include "tune/reuse/trial_estimate.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::tune::reuse {
namespace {

using testing::dims;

Task matmul_task(int64_t m, int64_t n, int64_t k, const std::string& name,
                 const std::string& a_name = "A", const std::string& b_name = "B") {
  ir::Tensor a = ir::placeholder(a_name, dims({m, k})), b = ir::placeholder(b_name, dims({k, n}));
  return Task::create({ops::matmul(a, b)}, {a, b}, name);
}

MeasureConfig quick_measure() {
  MeasureConfig m;
  m.timing.min_time_ms = 0.1;
  m.timing.min_repeats = 1;
  m.timing.max_repeats = 3;
  m.rounds = 1;
  m.round_ms = 0.1;
  m.finalists = 0;
  return m;
}

TEST(ReuseTuner, RangesFollowEquationsOneToThree) {
  ReuseFeatures src;
  src.tasks = 8;
  src.register_tiles = 64;
  src.panel_bytes = 4096;
  const ReuseOperator base = describe_operator(matmul_task(64, 64, 64, "base"));
  // N doubled: r1 = 1, r2 = 2.
  FeatureRanges wider = feature_ranges(describe_operator(matmul_task(64, 128, 64, "w")), base, src);
  EXPECT_DOUBLE_EQ(wider.tasks.lo, 8);
  EXPECT_DOUBLE_EQ(wider.tasks.hi, 16);
  EXPECT_DOUBLE_EQ(wider.register_tiles.lo, 64);
  EXPECT_DOUBLE_EQ(wider.register_tiles.hi, 128);
  EXPECT_DOUBLE_EQ(wider.panel_bytes.hi, 8192);
  // N halved: r2 = 1/2, the endpoints swap into [min, max].
  FeatureRanges narrower =
      feature_ranges(describe_operator(matmul_task(64, 32, 64, "n")), base, src);
  EXPECT_DOUBLE_EQ(narrower.tasks.lo, 4);
  EXPECT_DOUBLE_EQ(narrower.tasks.hi, 8);
  EXPECT_DOUBLE_EQ(narrower.register_tiles.lo, 32);
  // K doubled: r1 = 1/2 and r2 = 2 widen the task range both ways.
  FeatureRanges deeper =
      feature_ranges(describe_operator(matmul_task(64, 64, 128, "d")), base, src);
  EXPECT_DOUBLE_EQ(deeper.tasks.lo, 4);
  EXPECT_DOUBLE_EQ(deeper.tasks.hi, 16);
}

TEST(ReuseTuner, ValuesWithinARangeOrTheNearest) {
  const std::vector<int64_t> v = {1, 2, 4, 8};
  EXPECT_EQ(values_within(v, {2, 4}), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values_within(v, {3, 3.5}), (std::vector<int64_t>{4}));  // 4/3.5 < 3/2
  EXPECT_EQ(values_within(v, {5, 7}), (std::vector<int64_t>{8}));    // 8/7 < 5/4
  EXPECT_EQ(values_within(v, {100, 200}), (std::vector<int64_t>{8}));
}

TEST(ReuseTuner, CandidateShapesKeepTheSourceSketch) {
  Task task = matmul_task(64, 96, 12, "mm");
  search::SearchSpace space(task);
  const gensor::StageSpace& sp = space.stage(0).space;
  EXPECT_EQ(lshape_choices(sp), (std::vector<std::vector<int64_t>>{{1}, {2}, {3}, {4}, {6}, {12}}));
  // Products of a divisor of 64 = 2^6 and one of 96 = 2^5 * 3: 2^c * 3^d, c <= 11, d <= 1.
  EXPECT_EQ(task_counts(sp).size(), 24u);
  schedule::StageAnnotation base = task.default_schedule().stages[0];
  ASSERT_EQ(base.sketch, schedule::Sketch::kMultiLevelTiling);
  base.reduce_unroll = 8;
  schedule::StageAnnotation a = annotation_with_shapes(base, sp, {32, 48}, {4, 16}, {3});
  EXPECT_EQ(a.tile_outer, (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(a.tile_reg, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(a.tile_reduce, (std::vector<int64_t>{4}));
  EXPECT_EQ(a.reduce_unroll, 4);  // clamped to the reduce tile
  EXPECT_EQ(a.vector_axis, base.vector_axis);
  EXPECT_EQ(a.pack, base.pack);
  EXPECT_EQ(a.parallel, base.parallel);
  EXPECT_EQ(space.check_stage(0, a), "");
}

TEST(ReuseTuner, OperandsTranslateByPosition) {
  Task source = matmul_task(8, 8, 8, "source");
  Task user = matmul_task(16, 8, 8, "user", "X", "W");
  EXPECT_EQ(translate_operands({"B", "A"}, source.plan, user.plan),
            (std::vector<std::string>{"W", "X"}));
  EXPECT_THROW(translate_operands({"C"}, source.plan, user.plan), tessera::Error);
}

TEST(ReuseTuner, TunesAWiderMatmulFromANarrowOne) {
  Task source = matmul_task(64, 64, 64, "source");
  // Other operand names: the source's packing must be translated to be valid here.
  Task user = matmul_task(64, 128, 64, "user", "X", "W");
  schedule::KernelSchedule src = source.default_schedule();
  ASSERT_EQ(src.stages.size(), 1u);
  src.stages[0].tile_outer = {32, 32};
  src.stages[0].tile_mid.clear();
  src.stages[0].tile_reg = {4, 16};
  src.stages[0].tile_reduce = {16};
  // The register tile's 16 columns in the host's widest vectors (16 lanes with AVX-512, 8 with
  // AVX2): the source must be a valid schedule on the host it runs on.
  const search::SearchSpace source_space(source);
  src.stages[0].vector_width = gensor::vector_width_for(16, source_space.stage(0).space.lanes);
  src.stages[0].pack = {"B"};
  ASSERT_EQ(source_space.check_structure(src), "");

  ReuseTunerOptions options;
  options.measure = quick_measure();
  options.max_task_counts = 2;
  ReuseTuneResult r = reuse_tune(user, source, src, options);
  // The source: 4 tasks of 32x32, 4 * 16 register tiles of 4x16, K in 4 steps of 16.
  EXPECT_DOUBLE_EQ(r.source_features.tasks, 4);
  EXPECT_DOUBLE_EQ(r.source_features.register_tiles, 64);
  EXPECT_DOUBLE_EQ(r.ranges.tasks.lo, 4);
  EXPECT_DOUBLE_EQ(r.ranges.tasks.hi, 8);
  EXPECT_GT(r.trials, 0);
  EXPECT_GT(r.best_ms, 0);
  EXPECT_GE(r.task_counts_tried, 1);  // 0 when no candidate passed the space's checks
  EXPECT_LE(r.task_counts_tried, 2);
  EXPECT_EQ(r.best.tuner, "reuse");
  EXPECT_EQ(r.best.plan, src.plan);
  // The final race: at most 4 finalists of the rounds, then the rules' schedule; the one
  // returned is the race's fastest, with its race time.
  ASSERT_GE(r.race.size(), 2u);
  ASSERT_LE(r.race.size(), 5u);
  EXPECT_EQ(r.race.back().schedule.stages_text(),
            user.as_run(user.default_schedule()).stages_text());
  const RacedSchedule* fastest = &r.race.front();
  for (const RacedSchedule& c : r.race) {
    EXPECT_GT(c.ms, 0) << c.schedule.stages_text();  // every finalist verified in its round
    if (c.ms < fastest->ms) fastest = &c;
  }
  EXPECT_EQ(r.best.stages_text(), fastest->schedule.stages_text());
  EXPECT_DOUBLE_EQ(r.best_ms, fastest->ms);
  if (&r.race.back() == fastest) return;  // the rules' schedule won: not a reuse candidate
  // The best keeps the source's sketch and has a task count in range.
  const schedule::StageAnnotation& best = r.best.stages[0];
  EXPECT_EQ(best.sketch, schedule::Sketch::kMultiLevelTiling);
  EXPECT_EQ(best.vector_axis, src.stages[0].vector_axis);
  EXPECT_EQ(best.parallel, src.stages[0].parallel);
  search::SearchSpace space(user);
  ReuseFeatures f = reuse_features(space.stage(0).space, best);
  EXPECT_TRUE(r.ranges.tasks.contains(f.tasks)) << f.tasks;
  EXPECT_TRUE(r.ranges.register_tiles.contains(f.register_tiles)) << f.register_tiles;
  std::cout << "reuse tuner: " << r.trials << " trials over " << r.task_counts_tried
            << " task counts (estimate for the pair: "
            << reuse_trials(describe_operator(user), describe_operator(source)) << "), best "
            << r.best_ms << " ms: " << r.best.stages_text() << "\n";
}

TEST(ReuseTuner, RefusesPairsThatCannotReuse) {
  Task source = matmul_task(64, 64, 64, "source");
  Task crossed = matmul_task(32, 128, 64, "crossed");
  EXPECT_THROW(reuse_tune(crossed, source, source.default_schedule()), tessera::Error);
}

}  // namespace
}  // namespace tessera::tune::reuse
