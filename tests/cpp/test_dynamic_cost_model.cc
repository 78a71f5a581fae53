// DietCode's micro-kernel cost model in time form: geometry of a schedule's micro-kernel,
// padding and wave factors on hand-computed instances, time that grows with padding (the
// paper's draft predicted the opposite), and the wave fit recovering known constants.
#include <gtest/gtest.h>

#include <cmath>

#include "const_dims.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/stage_plan.h"
#include "tune/dynamic/cost_model.h"
#include "util/check.h"

namespace tessera::tune::dynamic {
namespace {

using ir::Tensor;

MicroKernelGeometry rows_by_cols(const ir::Var& t, int64_t tile_rows, int64_t tile_cols) {
  MicroKernelGeometry g;
  g.extents = {ir::mul(ir::int_imm(4), t), ir::int_imm(40)};
  g.tiles = {tile_rows, tile_cols};
  g.granules = g.tiles;  // the edge computes whole cache tiles
  g.reduce_extents = {ir::int_imm(24)};
  return g;
}

TEST(DynamicCostModel, InstanceShapeCountsTilesPaddingAndWaves) {
  ir::Var t = ir::size_var("T", 1, 64);
  const MicroKernelGeometry g = rows_by_cols(t, 16, 20);
  // T = 5: 20 rows -> 2 row tiles (32 padded rows), 40 cols -> 2 col tiles: 4 tiles.
  const InstanceShape s = instance_shape(g, {{t.get(), 5}}, 3);
  EXPECT_EQ(s.tiles, 4);
  EXPECT_DOUBLE_EQ(s.work, 20.0 * 40 * 24);
  EXPECT_DOUBLE_EQ(s.padding, 32.0 / 20.0);
  EXPECT_EQ(s.threads, 3);
  EXPECT_DOUBLE_EQ(s.wave_ratio(), 6.0 / 4.0);  // 4 tiles on 3 threads: 2 waves of 3
  // Fewer tiles than threads: one wave, threads / tiles.
  EXPECT_DOUBLE_EQ(instance_shape(g, {{t.get(), 1}}, 8).wave_ratio(), 8.0 / 2.0);
  // A serial micro-kernel has no waves.
  MicroKernelGeometry serial = g;
  serial.parallel = false;
  EXPECT_DOUBLE_EQ(instance_shape(serial, {{t.get(), 5}}, 8).wave_ratio(), 1.0);
  // Exact fit: T = 8 gives 32 rows, 2 x 2 tiles, 2 full waves on 2 threads.
  const InstanceShape exact = instance_shape(g, {{t.get(), 8}}, 2);
  EXPECT_DOUBLE_EQ(exact.padding, 1.0);
  EXPECT_DOUBLE_EQ(exact.wave_ratio(), 1.0);
}

TEST(DynamicCostModel, MorePaddingOrIdleThreadsPredictMoreTime) {
  ir::Var t = ir::size_var("T", 1, 64);
  const MicroKernelGeometry g = rows_by_cols(t, 16, 40);
  const KernelTimeModel tp{1000, 0, {}};  // points per ms, no overhead
  // T = 4 (16 rows, no padding) vs T = 5 (20 rows padded to 32): the time per real point grows.
  const InstanceShape a = instance_shape(g, {{t.get(), 4}}, 1),
                      b = instance_shape(g, {{t.get(), 5}}, 1);
  EXPECT_LT(predict_ms(a, tp, 1.0) / a.work, predict_ms(b, tp, 1.0) / b.work);
  EXPECT_DOUBLE_EQ(predict_ms(b, tp, 1.0), b.work * b.padding / tp.throughput);
  // With k = 1 a partial wave costs a whole one: 3 tiles on 4 threads take one tile's time x 4/4.
  const InstanceShape c = instance_shape(g, {{t.get(), 12}}, 4);  // 48 rows: 3 tiles
  EXPECT_DOUBLE_EQ(predict_ms(c, tp, 1.0), c.work * (4.0 / 3.0) / tp.throughput);
  EXPECT_DOUBLE_EQ(predict_ms(c, tp, 0.0), c.work / tp.throughput);
  EXPECT_DOUBLE_EQ(wave_factor(c, 0.5), 0.5 * 4.0 / 3.0 + 0.5);
  // The overhead adds once per call.
  EXPECT_DOUBLE_EQ(predict_ms(c, {1000, 0.25, {}}, 0.0), 0.25 + c.work / tp.throughput);
  // An empty instance runs nothing.
  EXPECT_EQ(predict_ms(instance_shape(g, {{t.get(), 0}}, 4), {1000, 0.25, {}}, 1.0), 0.0);
}

InstanceShape shape(double work, int64_t tiles, int threads) {
  InstanceShape s;
  s.work = work;
  s.tiles = tiles;
  s.threads = threads;
  return s;
}

TEST(DynamicCostModel, KernelFitRecoversThroughputAndOverhead) {
  const KernelTimeModel truth{250.0, 0.04, {}};
  const double k = 0.5;
  std::vector<TimeSample> samples;
  for (auto [work, tiles] : std::vector<std::pair<double, int64_t>>{{4000, 8}, {500, 1}, {90, 3}}) {
    const InstanceShape s = shape(work, tiles, 4);
    samples.push_back({s, predict_ms(s, truth, k)});
  }
  const KernelTimeModel fit = fit_kernel(samples, k);
  EXPECT_NEAR(fit.throughput, truth.throughput, 1e-6);
  EXPECT_NEAR(fit.overhead_ms, truth.overhead_ms, 1e-9);
  // One sample cannot separate an overhead: the line through the origin.
  const KernelTimeModel one = fit_kernel({samples[0]}, k);
  EXPECT_DOUBLE_EQ(one.overhead_ms, 0.0);
  EXPECT_NEAR(predict_ms(samples[0].shape, one, k), samples[0].ms, 1e-12);
  // Times that fall with more work would fit a negative slope: through the origin instead.
  const KernelTimeModel odd = fit_kernel({{shape(100, 4, 4), 2.0}, {shape(200, 4, 4), 1.0}}, k);
  EXPECT_GT(odd.throughput, 0);
  EXPECT_DOUBLE_EQ(odd.overhead_ms, 0.0);
  EXPECT_THROW(fit_kernel({{shape(0, 1, 1), 1.0}}, k), Error);
}

TEST(DynamicCostModel, PredictionsFollowTheTimedSamples) {
  const double k = 1.0;  // full waves only (8 tiles on 4 threads): u is the work
  // Slower per point at the largest size than the line through the two below it.
  const std::vector<TimeSample> samples = {{shape(1000, 8, 4), 4.04},
                                           {shape(100, 8, 4), 0.44},
                                           {shape(4000, 8, 4), 19.04},
                                           {shape(1000, 8, 4), 4.06}};
  const KernelTimeModel fit = fit_kernel(samples, k);
  ASSERT_EQ(fit.knots.size(), 3u);  // by u, the two samples at 1000 averaged
  EXPECT_DOUBLE_EQ(fit.knots[1].first, 1000.0);
  EXPECT_NEAR(fit.knots[1].second, 4.05, 1e-12);
  EXPECT_NEAR(predict_ms(shape(100, 8, 4), fit, k), 0.44, 1e-12);
  EXPECT_NEAR(predict_ms(shape(4000, 8, 4), fit, k), 19.04, 1e-12);
  // Between knots: linear; beyond the ends: the end segments extended.
  EXPECT_NEAR(predict_ms(shape(550, 8, 4), fit, k), (0.44 + 4.05) / 2, 1e-12);
  EXPECT_NEAR(predict_ms(shape(2500, 8, 4), fit, k), (4.05 + 19.04) / 2, 1e-12);
  EXPECT_NEAR(predict_ms(shape(5000, 8, 4), fit, k), 19.04 + 1000 * (19.04 - 4.05) / 3000, 1e-12);
  EXPECT_NEAR(predict_ms(shape(50, 8, 4), fit, k), 0.44 - 50 * (4.05 - 0.44) / 900, 1e-12);
  // The line is still fitted (and reported) over every sample.
  EXPECT_GT(fit.throughput, 0);
  // An end segment that falls (noise) is not extended: the time beyond it is in proportion.
  const KernelTimeModel odd = fit_kernel({{shape(100, 8, 4), 2.0}, {shape(200, 8, 4), 1.0}}, k);
  EXPECT_NEAR(predict_ms(shape(400, 8, 4), odd, k), 2.0, 1e-12);
  EXPECT_NEAR(predict_ms(shape(50, 8, 4), odd, k), 1.0, 1e-12);
  EXPECT_NEAR(predict_ms(shape(150, 8, 4), odd, k), 1.5, 1e-12);
}

TEST(DynamicCostModel, WaveFitRecoversTheMachineConstants) {
  const KernelTimeModel truth{3.5, 0.05, {}};
  const double k = 0.65;
  std::vector<TimeSample> samples;
  // Wave ratios 1, 8/5, 4/3, 2, 4 on 4 threads, at different amounts of work.
  for (auto [work, tiles] : std::vector<std::pair<double, int64_t>>{
           {64, 8}, {40, 5}, {30, 3}, {20, 2}, {10, 1}, {48, 4}}) {
    const InstanceShape s = shape(work, tiles, 4);
    samples.push_back({s, predict_ms(s, truth, k)});
  }
  const WaveFit fit = fit_wave(samples, 1.0);
  EXPECT_NEAR(fit.wave_k, k, 1e-9);
  EXPECT_NEAR(fit.model.throughput, truth.throughput, 1e-9);
  EXPECT_NEAR(fit.model.overhead_ms, truth.overhead_ms, 1e-9);
  // Idle threads that cost nothing give k = 0; costs past a whole wave are clamped to k = 1.
  std::vector<TimeSample> free_idle, dear_idle;
  for (const TimeSample& t : samples) {
    free_idle.push_back({t.shape, t.shape.work / 3.5});
    dear_idle.push_back({t.shape, t.shape.work * (3 * t.shape.wave_ratio() - 2) / 3.5});
  }
  EXPECT_NEAR(fit_wave(free_idle, 1.0).wave_k, 0.0, 1e-9);
  EXPECT_DOUBLE_EQ(fit_wave(dear_idle, 0.5).wave_k, 1.0);
  // One wave ratio says nothing about k: the fallback stays.
  std::vector<TimeSample> full_waves;
  for (double work : {10.0, 20.0, 40.0}) {
    const InstanceShape s = shape(work, 4, 4);
    full_waves.push_back({s, predict_ms(s, truth, k)});
  }
  const WaveFit flat = fit_wave(full_waves, 0.3);
  EXPECT_DOUBLE_EQ(flat.wave_k, 0.3);
  EXPECT_NEAR(flat.model.throughput, truth.throughput, 1e-9);
}

TEST(DynamicCostModel, EdgeGranuleFollowsTheLowering) {
  ir::Var t = ir::size_var("T", 1, 64);
  Tensor x = ir::placeholder("X", {ir::mul(ir::int_imm(4), t), ir::int_imm(24)});
  Tensor w = ir::placeholder("W", testing::dims({40, 24}));
  Tensor y = ops::dense(x, w);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  schedule::KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
  const schedule::StageAnnotation& ann = ks.stages[0];
  ASSERT_GE(ann.vector_axis, 0);
  ASSERT_GT(ann.tile_reg[1 - ann.vector_axis], 1) << "a row register tile that can be cut";
  schedule::KernelSchedule split_ks = ks;
  split_ks.stages[0].edge = schedule::EdgeMode::kSplit;
  const MicroKernelGeometry split = geometry_of(plan, split_ks, {{t.get(), 64}});
  schedule::KernelSchedule local_ks = ks;
  local_ks.stages[0].edge = schedule::EdgeMode::kLocalPad;
  const MicroKernelGeometry local = geometry_of(plan, local_ks, {{t.get(), 64}});
  for (size_t a = 0; a < 2; ++a) {
    // Local padding computes whole register tiles; the edge variants skip rows past the end.
    EXPECT_EQ(local.granules[a], ann.tile_reg[a]);
    EXPECT_EQ(split.granules[a], static_cast<int>(a) == ann.vector_axis ? ann.tile_reg[a] : 1);
  }
}

TEST(DynamicCostModel, GeometryIsTheMainStagesCacheTile) {
  ir::Var t = ir::size_var("T", 1, 64);
  Tensor x = ir::placeholder("X", {ir::mul(ir::int_imm(4), t), ir::int_imm(24)});
  Tensor w = ir::placeholder("W", testing::dims({40, 24}));
  // A row sum (small reduction) feeding nothing heavy, next to the matmul: the matmul is main.
  Tensor y = ops::dense(x, w);
  Tensor s = ops::reduce_sum(x, {1});
  schedule::StagePlan plan = schedule::plan_stages({s, y}, {x, w});
  schedule::KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
  const MicroKernelGeometry g = geometry_of(plan, ks, {{t.get(), 64}});
  ASSERT_EQ(plan.stages[g.stage].op->name, y->name);
  EXPECT_EQ(g.tiles, ks.stages[g.stage].tile_outer);
  ASSERT_EQ(g.extents.size(), 2u);
  EXPECT_FALSE(g.extents[0]->is_const_int());
  EXPECT_TRUE(g.extents[1]->is_const_int(40));
  ASSERT_EQ(g.reduce_extents.size(), 1u);
  EXPECT_TRUE(g.reduce_extents[0]->is_const_int(24));
}

}  // namespace
}  // namespace tessera::tune::dynamic
