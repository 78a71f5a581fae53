// The CPU features of ETO's reuse tuner (B, T, M with BShape, TShape, LShape) read off a
// multi-level-tiling annotation, and the shape costs behind GetBShape / GetTShape / GetLShape,
// on a 256^3 matmul whose numbers can be worked out by hand.
#include <gtest/gtest.h>

#include "const_dims.h"
#include "ops/ops.h"
#include "tune/common.h"
#include "tune/reuse/reuse_features.h"
#include "util/check.h"

namespace tessera::tune::reuse {
namespace {

using testing::dims;

// C[i, j] = sum(k) A[i, k] B[k, j] in fp32, [m, k] x [k, n], on the reference target (16 lanes,
// 32 vector registers).
gensor::StageSpace matmul_space(int64_t m, int64_t n, int64_t k) {
  ir::Tensor a = ir::placeholder("A", dims({m, k})), b = ir::placeholder("B", dims({k, n}));
  Task task = Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  return gensor::make_stage_space(task.plan, 0, schedule::Target{});
}

schedule::StageAnnotation tiling(std::vector<int64_t> outer, std::vector<int64_t> reg,
                                 std::vector<int64_t> reduce) {
  schedule::StageAnnotation ann;
  ann.op = "mm";
  ann.tile_outer = std::move(outer);
  ann.tile_reg = std::move(reg);
  ann.tile_reduce = std::move(reduce);
  ann.vector_axis = 1;
  ann.vector_width = 16;
  return ann;
}

TEST(ReuseFeatures, FeaturesOfAnAnnotation) {
  gensor::StageSpace sp = matmul_space(256, 256, 256);
  ASSERT_EQ(sp.vector_axis, 1);
  ReuseFeatures f = reuse_features(sp, tiling({64, 64}, {4, 16}, {32}));
  EXPECT_EQ(f.bshape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(f.tshape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(f.lshape, (std::vector<int64_t>{8}));
  EXPECT_DOUBLE_EQ(f.tasks, 16);
  EXPECT_DOUBLE_EQ(f.register_tiles, 16 * 16 * 4);
  // Per task and outer reduce step: A[64, 32] and B[32, 64] in fp32.
  EXPECT_DOUBLE_EQ(f.panel_bytes, 16 * (64 * 32 * 4 + 32 * 64 * 4));
  // Edge tiles: 100 = 64 + 36 along each axis; BShape is clamped to the extent.
  gensor::StageSpace odd = matmul_space(100, 40, 256);
  ReuseFeatures g = reuse_features(odd, tiling({64, 64}, {4, 16}, {256}));
  EXPECT_DOUBLE_EQ(g.tasks, 2);
  EXPECT_EQ(g.bshape, (std::vector<int64_t>{64, 40}));
  EXPECT_EQ(g.lshape, (std::vector<int64_t>{1}));
}

TEST(ReuseFeatures, RejectsOtherSketchesAndMismatchedTiles) {
  gensor::StageSpace sp = matmul_space(256, 256, 256);
  schedule::StageAnnotation cross = tiling({64, 64}, {4, 16}, {32});
  cross.sketch = schedule::Sketch::kCrossLaneReduction;
  EXPECT_THROW(reuse_features(sp, cross), tessera::Error);
  EXPECT_THROW(reuse_features(sp, tiling({64}, {4}, {32})), tessera::Error);
}

TEST(ReuseFeatures, BShapeCostCountsLinesOfAllTasks) {
  gensor::StageSpace sp = matmul_space(256, 256, 256);
  // 16 tasks of 64x64: each reads A[64, 256] (1024 lines) and B[256, 64] (256 rows of 4 lines).
  EXPECT_DOUBLE_EQ(bshape_cost(sp, {64, 64}), 16 * (1024 + 1024));
  // 16 tasks of 16x256: A[16, 256] (256 lines) and all of B (4096 lines) each.
  EXPECT_DOUBLE_EQ(bshape_cost(sp, {16, 256}), 16 * (256 + 4096));
  // GetBShape: square tiles share the most; impossible task counts have none.
  EXPECT_EQ(get_bshape(sp, 16), (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(get_bshape(sp, 1), (std::vector<int64_t>{256, 256}));
  EXPECT_FALSE(get_bshape(sp, 256 * 256 + 1));
  // 7 tasks need an edge tile: 256 = 6 * 37 + 34 along one axis.
  std::optional<std::vector<int64_t>> seven = get_bshape(sp, 7);
  ASSERT_TRUE(seven);
  EXPECT_TRUE(*seven == (std::vector<int64_t>{37, 256}) ||
              *seven == (std::vector<int64_t>{256, 37}));
}

TEST(ReuseFeatures, TShapeCostIsLoadsPerMultiplyAdd) {
  gensor::StageSpace sp = matmul_space(256, 256, 256);
  // 4x16: 4 broadcasts of A and one 16-lane vector of B per step, for 64 multiply-adds.
  EXPECT_DOUBLE_EQ(*tshape_cost(sp, {4, 16}), 5.0 / 64);
  EXPECT_DOUBLE_EQ(*tshape_cost(sp, {2, 32}), 4.0 / 64);
  EXPECT_DOUBLE_EQ(*tshape_cost(sp, {8, 8}), 9.0 / 64);  // 8-lane vectors
  // 32x32 needs 64 accumulator vectors: over the register file.
  EXPECT_FALSE(tshape_cost(sp, {32, 32}));
  // GetTShape: 64 register tiles per 64x64 cache tile, so 64 points each; 2x32 loads least.
  EXPECT_EQ(get_tshape(sp, {64, 64}, 64), (std::vector<int64_t>{2, 32}));
  // 4 register tiles per task are 1024 points each: none fits the registers.
  EXPECT_FALSE(get_tshape(sp, {64, 64}, 4));
}

TEST(ReuseFeatures, ShapesFromFeaturesRoundTrip) {
  gensor::StageSpace sp = matmul_space(256, 256, 256);
  // GetLShape: 16 KiB of panels per task with 64x64 tiles is a 32-deep reduce tile.
  EXPECT_EQ(get_lshape(sp, {64, 64}, 16384), (std::vector<int64_t>{8}));
  EXPECT_EQ(get_lshape(sp, {64, 64}, 1e12), (std::vector<int64_t>{1}));  // as large as it gets
  // B, T, M chosen, shapes derived, and the annotation built from them has those features.
  const int64_t tasks = 32, tiles_per_task = 32;
  std::vector<int64_t> b = *get_bshape(sp, tasks);
  std::vector<int64_t> t = *get_tshape(sp, b, tiles_per_task);
  std::vector<int64_t> l = get_lshape(sp, b, 8192);
  std::vector<int64_t> reduce_tile = {256 / l[0]};
  ReuseFeatures f = reuse_features(sp, tiling(b, t, reduce_tile));
  EXPECT_DOUBLE_EQ(f.tasks, tasks);
  EXPECT_DOUBLE_EQ(f.register_tiles, tasks * tiles_per_task);
  EXPECT_DOUBLE_EQ(f.panel_bytes, tasks * panel_bytes_per_task(sp, b, l));
}

}  // namespace
}  // namespace tessera::tune::reuse
