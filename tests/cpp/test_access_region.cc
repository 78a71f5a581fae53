// Access-region analysis: footprints of matmul and convolution tiles against hand-computed
// values, and every region against a brute-force reference that evaluates the index expressions
// at every point of the tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "const_dims.h"
#include "cost/access_region.h"
#include "ir/eval.h"
#include "ir/functor.h"
#include "ops/ops.h"
#include "schedule/stage_plan.h"

namespace tessera::cost {
namespace {

using ir::Expr;
using ir::Tensor;

using testing::dims;

// Regions of the reduction stage computing `t` (producers such as pads inlined).
AccessRegions regions_of(const Tensor& t, const std::vector<Tensor>& inputs) {
  schedule::StagePlan plan = schedule::plan_stages({t}, inputs);
  const schedule::Stage& s = plan.stages.back();
  return AccessRegions::for_compute(*s.op->op, schedule::inline_body(s.op, plan.inlined),
                                    s.written().get());
}

size_t index_of(const AccessRegions& ar, const std::string& name) {
  for (size_t i = 0; i < ar.tensors().size(); ++i) {
    if (ar.tensors()[i].name == name) return i;
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

// Bounding box of every index each access of tensor `t` takes over the tile box, by evaluation.
std::vector<int64_t> brute_force_region(const AccessRegions& ar, const ir::ComputeOpNode& op,
                                        size_t t, const std::vector<int64_t>& tile) {
  std::vector<ir::Var> iters;
  for (const auto& iv : op.axes) iters.push_back(iv.var);
  for (const auto& iv : op.reduce_axes) iters.push_back(iv.var);
  const auto& ta = ar.tensors()[t];
  const size_t nd = ta.shape.size();
  std::vector<int64_t> lo(nd, INT64_MAX), hi(nd, INT64_MIN);
  std::vector<int64_t> p(iters.size(), 0);
  while (true) {
    ir::EvalEnv env;
    for (size_t i = 0; i < iters.size(); ++i) env.vars[iters[i].get()] = ir::Scalar::of_int(p[i]);
    for (const auto& acc : ta.accesses) {
      for (size_t d = 0; d < nd; ++d) {
        int64_t v = ir::evaluate(acc[d], env).i;
        lo[d] = std::min(lo[d], v);
        hi[d] = std::max(hi[d], v);
      }
    }
    size_t i = 0;
    for (; i < p.size(); ++i) {
      int64_t lim = std::min(tile[i], ar.extents()[i]);
      if (++p[i] < lim) break;
      p[i] = 0;
    }
    if (i == p.size()) break;
  }
  std::vector<int64_t> shape(nd);
  for (size_t d = 0; d < nd; ++d) shape[d] = std::min(hi[d] - lo[d] + 1, ta.shape[d]);
  return shape;
}

TEST(AccessRegion, MatmulTileFootprintByHand) {
  Tensor a = ir::placeholder("A", dims({256, 512})), b = ir::placeholder("B", dims({512, 128}));
  Tensor c = ops::matmul(a, b);
  AccessRegions ar = regions_of(c, {a, b});
  ASSERT_EQ(ar.num_iters(), 3);  // i, j, k
  EXPECT_EQ(ar.num_spatial(), 2);
  const std::vector<int64_t> tile = {32, 64, 16};
  EXPECT_EQ(ar.region_shape(index_of(ar, "A"), tile), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(ar.region_shape(index_of(ar, "B"), tile), (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(ar.region_shape(index_of(ar, "matmul"), tile), (std::vector<int64_t>{32, 64}));
  // F(T) = (32*16 + 16*64 + 32*64) floats.
  EXPECT_DOUBLE_EQ(ar.footprint_bytes(tile), 4.0 * (32 * 16 + 16 * 64 + 32 * 64));
  // Cache lines: A rows of 16 floats = one 64-byte line each; B/C rows are whole lines already.
  // With k tile 4, A rows (16 bytes) still cost a whole line.
  const std::vector<int64_t> thin = {32, 64, 4};
  EXPECT_DOUBLE_EQ(ar.region_bytes(index_of(ar, "A"), thin, 0), 4.0 * 32 * 4);
  EXPECT_DOUBLE_EQ(ar.region_bytes(index_of(ar, "A"), thin, 64), 64.0 * 32);
  // Tiles larger than the extents are clamped.
  EXPECT_EQ(ar.region_shape(index_of(ar, "B"), {1, 1000, 1000}), (std::vector<int64_t>{512, 128}));
}

TEST(AccessRegion, MatmulTrafficByHand) {
  const int64_t M = 256, N = 128, K = 512;
  Tensor a = ir::placeholder("A", dims({M, K})), b = ir::placeholder("B", dims({K, N}));
  AccessRegions ar = regions_of(ops::matmul(a, b), {a, b});
  const int64_t ti = 32, tj = 64, tk = 128;
  AccessRegions::Traffic q = ar.traffic({ti, tj, tk});
  // Every tile instance loads its A and B blocks: A is re-read once per j tile, B once per i tile.
  EXPECT_DOUBLE_EQ(q.input_bytes, 4.0 * (M * K * (N / tj) + K * N * (M / ti)));
  // The output block is written per tile and read back for every further reduce tile.
  EXPECT_DOUBLE_EQ(q.output_bytes, 4.0 * M * N * (2 * (K / tk) - 1));
  EXPECT_DOUBLE_EQ(ar.traffic({ti, tj, tk}, 0, true).output_bytes, 4.0 * M * N);
  EXPECT_DOUBLE_EQ(ar.spatial_tiles({ti, tj, tk}), (M / ti) * (N / tj));
  EXPECT_DOUBLE_EQ(ar.reduce_tiles({ti, tj, tk}), K / tk);
  // Row strides (elements) seen along each iterator.
  EXPECT_EQ(ar.element_stride(index_of(ar, "A"), 0), K);
  EXPECT_EQ(ar.element_stride(index_of(ar, "A"), 2), 1);
  EXPECT_EQ(ar.element_stride(index_of(ar, "B"), 0), 0);
  EXPECT_EQ(ar.element_stride(index_of(ar, "B"), 2), N);
}

TEST(AccessRegion, StridedDilatedConvByHand) {
  // X[1, 8, 33, 33], W[16, 8, 3, 3], stride 2, dilation 2, no padding: one reduce stage.
  Tensor x = ir::placeholder("X", dims({1, 8, 33, 33})),
         w = ir::placeholder("W", dims({16, 8, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {2, 2}, {0, 0}, {2, 2});
  AccessRegions ar = regions_of(y, {x, w});
  ASSERT_EQ(ar.num_iters(), 7);  // n, o, y, x, rc, ry, rx
  const std::vector<int64_t> tile = {1, 4, 5, 6, 2, 3, 2};
  // Input rows: (5-1)*2 + (3-1)*2 + 1 = 13, columns (6-1)*2 + (2-1)*2 + 1 = 13, channels 2.
  EXPECT_EQ(ar.region_shape(index_of(ar, "X"), tile), (std::vector<int64_t>{1, 2, 13, 13}));
  EXPECT_EQ(ar.region_shape(index_of(ar, "W"), tile), (std::vector<int64_t>{4, 2, 3, 2}));
  EXPECT_EQ(ar.region_shape(index_of(ar, "conv2d"), tile), (std::vector<int64_t>{1, 4, 5, 6}));
  EXPECT_DOUBLE_EQ(ar.footprint_bytes(tile), 4.0 * (2 * 13 * 13 + 4 * 2 * 3 * 2 + 4 * 5 * 6));
}

TEST(AccessRegion, PaddedConvThroughInlinedPadMatchesBruteForce) {
  // Padding: the pad op feeding a reduction is its own stage, the conv reads its output.
  Tensor x = ir::placeholder("X", dims({1, 3, 5, 5})), w = ir::placeholder("W", dims({4, 3, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  const schedule::Stage& s = plan.stages.back();
  AccessRegions ar = AccessRegions::for_compute(
      *s.op->op, schedule::inline_body(s.op, plan.inlined), s.written().get());
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> tile;
    for (int64_t e : ar.extents())
      tile.push_back(std::uniform_int_distribution<int64_t>(1, e)(rng));
    for (size_t t = 0; t < ar.tensors().size(); ++t) {
      EXPECT_EQ(ar.region_shape(t, tile), brute_force_region(ar, *s.op->op, t, tile))
          << ar.tensors()[t].name;
    }
  }
}

TEST(AccessRegion, GroupedConvNonAffineIndexMatchesBruteForce) {
  // groups = 2: the input channel is floordiv(o, O/groups) * C/groups + rc (bound analysis path).
  Tensor x = ir::placeholder("X", dims({1, 8, 9, 9})), w = ir::placeholder("W", dims({6, 4, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {0, 0}, {1, 1}, 2);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  const schedule::Stage& s = plan.stages.back();
  AccessRegions ar = AccessRegions::for_compute(
      *s.op->op, schedule::inline_body(s.op, plan.inlined), s.written().get());
  const size_t xi = index_of(ar, "X");
  // A tile of 3 output channels starting at 0 stays in group 0: 4 input channels.
  std::vector<int64_t> tile = {1, 3, 2, 2, 4, 3, 3};
  EXPECT_EQ(ar.region_shape(xi, tile)[1], 4);
  EXPECT_EQ(ar.region_shape(xi, tile), brute_force_region(ar, *s.op->op, xi, tile));
  // 4 output channels span both groups: all 8 input channels.
  tile[1] = 4;
  EXPECT_EQ(ar.region_shape(xi, tile)[1], 8);
  EXPECT_EQ(ar.region_shape(xi, tile), brute_force_region(ar, *s.op->op, xi, tile));
  EXPECT_EQ(ar.element_stride(xi, 1), -1);  // not affine in o
}

TEST(AccessRegion, PoolingAndEpilogueReads) {
  // avg_pool2d 2x2: one reduce over (ry, rx) reading X[n, c, 2y + ry, 2x + rx] and an
  // elementwise divide fused as the epilogue (it reads nothing but the accumulator).
  Tensor x = ir::placeholder("X", dims({1, 4, 16, 16}));
  Tensor p = ops::avg_pool2d(x, {2, 2});
  AccessRegions ar = regions_of(p, {x});
  const size_t xi = index_of(ar, "X");
  EXPECT_EQ(ar.region_shape(xi, {1, 2, 3, 4, 2, 2}), (std::vector<int64_t>{1, 2, 6, 8}));
  // Dense with a bias epilogue: the bias is an epilogue-only read, moved once per spatial tile.
  Tensor in = ir::placeholder("In", dims({8, 32})), wt = ir::placeholder("Wt", dims({16, 32}));
  Tensor bias = ir::placeholder("bias", dims({16}));
  Tensor d = ops::dense(in, wt, bias);
  schedule::StagePlan plan = schedule::plan_stages({d}, {in, wt, bias});
  ASSERT_EQ(plan.stages.size(), 1u);
  const schedule::Stage& s = plan.stages[0];
  ASSERT_TRUE(s.epilogue);
  ir::Expr epi = schedule::replace_access(schedule::inline_body(s.epilogue, plan.inlined),
                                          s.op.get(), ir::float_imm(0.0));
  ir::VarMap vm;
  for (size_t a = 0; a < s.op->op->axes.size(); ++a) {
    vm[s.epilogue->op->axes[a].var.get()] = s.op->op->axes[a].var;
  }
  AccessRegions ad =
      AccessRegions::for_compute(*s.op->op, schedule::inline_body(s.op, plan.inlined),
                                 s.written().get(), ir::substitute(epi, vm));
  const size_t bi = index_of(ad, "bias");
  EXPECT_TRUE(ad.tensors()[bi].epilogue);
  EXPECT_EQ(ad.region_shape(bi, {4, 8, 16}), (std::vector<int64_t>{8}));
  // Epilogue reads: once per spatial tile (8/4 * 16/8 tiles), not per reduce tile.
  AccessRegions::Traffic with = ad.traffic({4, 8, 16});
  AccessRegions plain = AccessRegions::for_compute(
      *s.op->op, schedule::inline_body(s.op, plan.inlined), s.written().get());
  EXPECT_DOUBLE_EQ(with.input_bytes - plain.traffic({4, 8, 16}).input_bytes, 4.0 * 8 * 2 * 2);
}

}  // namespace
}  // namespace tessera::cost
