// The register-blocked sketch vectorised along an axis other than the output's innermost one,
// with operands packed along whichever dimension that axis indexes: the schedule rules' choice
// (conv2d on small images picks c_out and packs the weight along dim 0; Q.K^T packs K's row dim)
// and the generated kernels, checked against the reference interpreter.
#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/lower_access.h"
#include "synthetic_hw.h"

namespace tessera::testing {
namespace {

using ir::Expr;
using ir::placeholder;
using ir::Tensor;

// The annotation the rules give the stage that computes `op_name`.
schedule::StageAnnotation rule_annotation(const std::vector<Tensor>& outs,
                                          const std::vector<Tensor>& ins,
                                          const std::string& op_name) {
  schedule::StagePlan plan = schedule::plan_stages(outs, ins);
  schedule::KernelSchedule ks = schedule::default_schedule(plan, synthetic_target());
  for (const auto& s : ks.stages) {
    if (s.op == op_name) return s;
  }
  ADD_FAILURE() << "no stage " << op_name;
  return {};
}

TEST(VectorAxis, PackedShapeAndIndicesSplitTheChosenDim) {
  auto shape = schedule::packed_shape(dims({40, 8, 3}), 16, 0);
  ASSERT_EQ(shape.size(), 4u);
  EXPECT_EQ(shape[0]->int_value, 3);  // ceil(40 / 16)
  EXPECT_EQ(shape[1]->int_value, 8);
  EXPECT_EQ(shape[2]->int_value, 3);
  EXPECT_EQ(shape[3]->int_value, 16);
  auto last = schedule::packed_shape(dims({40, 8, 3}), 2, -1);
  EXPECT_EQ(last[0]->int_value, 2);
  EXPECT_EQ(last[1]->int_value, 40);
  EXPECT_EQ(last[3]->int_value, 2);
}

TEST(VectorAxis, ConvOnSmallImagesVectorisesOutputChannels) {
  Tensor x = placeholder("X", dims({1, 64, 7, 7})), w = placeholder("W", dims({64, 64, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  schedule::StageAnnotation ann = rule_annotation({y}, {x, w}, y->name);
  EXPECT_EQ(ann.vector_axis, 1) << ann.to_json().dump();
  EXPECT_EQ(ann.vector_width, 16);
  ASSERT_EQ(ann.pack.size(), 1u);
  EXPECT_EQ(ann.pack[0], "W");
  check_graph({{y}, {x, w}}, std::nullopt, /*use_jit=*/true, {1e-4, 1e-4});
}

TEST(VectorAxis, ConvOnLargeImagesKeepsTheInnermostAxis) {
  Tensor x = placeholder("X", dims({1, 16, 32, 64})), w = placeholder("W", dims({16, 16, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  EXPECT_EQ(rule_annotation({y}, {x, w}, y->name).vector_axis, 3);
}

TEST(VectorAxis, StrideTwoConvDoesNotVectoriseItsGatheredWidth) {
  // A stride-2 stem: along w every input read is a gather (stride 2), along c_out the packed
  // weight is contiguous, so c_out wins even on a wide image.
  Tensor x = placeholder("X", dims({1, 3, 64, 64})), w = placeholder("W", dims({32, 3, 7, 7}));
  Tensor y = ops::conv2d(x, w, nullptr, {2, 2}, {3, 3});
  schedule::StageAnnotation ann = rule_annotation({y}, {x, w}, y->name);
  EXPECT_EQ(ann.vector_axis, 1) << ann.to_json().dump();
  check_graph({{y}, {x, w}}, std::nullopt, /*use_jit=*/true, {1e-4, 1e-4});
}

TEST(VectorAxis, ConvWithBiasReluAndOddChannelCounts) {
  // c_out = 40: the last panel along c_out is partial (zero-filled pack, scalar edge tiles).
  Tensor x = placeholder("X", dims({2, 24, 6, 5})), w = placeholder("W", dims({40, 24, 3, 3}));
  Tensor b = placeholder("b", dims({40}));
  Tensor y = ops::relu(ops::conv2d(x, w, b, {1, 1}, {1, 1}));
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w, b});
  schedule::KernelSchedule ks = schedule::default_schedule(plan, synthetic_target());
  bool channels = false;
  for (const auto& s : ks.stages) channels = channels || s.vector_axis == 1;
  EXPECT_TRUE(channels) << ks.dump();
  check_graph({{y}, {x, w, b}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
  check_graph({{y}, {x, w, b}}, ks, /*use_jit=*/false, {1e-4, 1e-4});
}

TEST(VectorAxis, QueryKeyProductPacksTheKeyRows) {
  // S[b, i, j] = sum_d Q[b, i, d] * K[b, j, d]: K is indexed by the vector axis j in dim 1.
  Tensor q = placeholder("Q", dims({2, 64, 32})), k = placeholder("K", dims({2, 96, 32}));
  Tensor s = ops::batch_matmul(q, k, false, true);
  schedule::StageAnnotation ann = rule_annotation({s}, {q, k}, s->name);
  EXPECT_EQ(ann.vector_axis, 2);
  ASSERT_EQ(ann.pack.size(), 1u) << ann.to_json().dump();
  EXPECT_EQ(ann.pack[0], "K");
  schedule::KernelSchedule ks;
  ks.stages.push_back(ann);
  check_graph({{s}, {q, k}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
}

// A band product (Longformer's G2BMM, as EinNet writes it): O[b, m, w] = sum_k A[b, m, k] *
// B[b, k, m + w]. No spatial axis reuses a vector (m indexes both inputs), so no register block;
// a cross-lane reduction would gather B down a column per lane. Along w, B's rows are contiguous
// and A is broadcast: the rules vectorise w. Read as B[b, m + w, k] the product is a row
// reduction over contiguous rows and stays cross-lane.
TEST(VectorAxis, BandProductVectorisesTheBandNotAGatheredReduction) {
  const int64_t batch = 2, rows = 40, band = 21, depth = 32;
  Tensor a = placeholder("A", dims({batch, rows, depth}));
  Tensor bt = placeholder("B", dims({batch, depth, rows + band - 1}));
  auto band_product = [&](const Tensor& b, bool k_major) {
    return ir::reduce(
        "band", dims({batch, rows, band}), dims({depth}), ir::ReduceKind::kSum,
        [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& r) {
          const Expr col = v[1] + v[2];
          return ir::access(a, {v[0], v[1], r[0]}) *
                 (k_major ? ir::access(b, {v[0], r[0], col}) : ir::access(b, {v[0], col, r[0]}));
        });
  };
  Tensor o = band_product(bt, true);
  schedule::StageAnnotation ann = rule_annotation({o}, {a, bt}, o->name);
  EXPECT_EQ(ann.sketch, schedule::Sketch::kMultiLevelTiling) << ann.to_json().dump();
  EXPECT_EQ(ann.vector_axis, 2) << ann.to_json().dump();
  schedule::KernelSchedule ks;
  ks.stages.push_back(ann);
  check_graph({{o}, {a, bt}}, ks, /*use_jit=*/true, {1e-4, 1e-4});

  Tensor br = placeholder("B", dims({batch, rows + band - 1, depth}));
  Tensor rowwise = band_product(br, false);
  EXPECT_EQ(rule_annotation({rowwise}, {a, br}, rowwise->name).sketch,
            schedule::Sketch::kCrossLaneReduction);
}

TEST(VectorAxis, TransposingCopiesAreBlockedAlongBothAxes) {
  // T[b, k, n] = B[b, n, k]: the lanes run along n, gathering from B's rows; k walks B's
  // innermost dim, so 64 x 64 blocks keep the rows a run gathers in cache while k steps.
  Tensor b = placeholder("B", dims({2, 200, 96}));
  Tensor t = ir::compute("T", dims({2, 96, 200}), [&](const std::vector<ir::Var>& v) {
    return ir::access(b, {v[0], v[2], v[1]});
  });
  const schedule::StageAnnotation ann = rule_annotation({t}, {b}, "T");
  EXPECT_EQ(ann.vector_axis, 2) << ann.to_json().dump();
  EXPECT_EQ(ann.tile_outer[1], 64) << ann.to_json().dump();
  EXPECT_EQ(ann.tile_outer[2], 64) << ann.to_json().dump();
  EXPECT_EQ(ann.s1_order, (std::vector<int>{0, 2, 1})) << ann.to_json().dump();
  schedule::KernelSchedule ks;
  ks.stages.push_back(ann);
  check_graph({{t}, {b}}, ks, /*use_jit=*/true);
  // The axis walking B's innermost dim may be any: P[k, b, n] = B[b, n, k] puts k first.
  Tensor p = ir::compute("P", dims({96, 2, 200}), [&](const std::vector<ir::Var>& v) {
    return ir::access(b, {v[1], v[2], v[0]});
  });
  EXPECT_EQ(rule_annotation({p}, {b}, "P").s1_order, (std::vector<int>{1, 2, 0}));
  // A permutation that keeps the innermost dim reads along its lanes: not blocked.
  Tensor c = placeholder("C", dims({2, 96, 200}));
  Tensor same = ir::compute("S", dims({96, 2, 200}), [&](const std::vector<ir::Var>& v) {
    return ir::access(c, {v[1], v[0], v[2]});
  });
  EXPECT_TRUE(rule_annotation({same}, {c}, "S").s1_order.empty());
}

TEST(VectorAxis, PackingRunsInParallelOnlyWhenTheStageDoes) {
  // The copy into panels is a loop of its own: a serial stage must not dispatch it on the pool.
  Tensor q = placeholder("Q", dims({2, 64, 32})), k = placeholder("K", dims({2, 96, 32}));
  Tensor s = ops::batch_matmul(q, k, false, true);
  const schedule::StagePlan plan = schedule::plan_stages({s}, {q, k});
  schedule::KernelSchedule ks;
  ks.stages.push_back(rule_annotation({s}, {q, k}, s->name));
  ASSERT_EQ(ks.stages[0].pack.size(), 1u);
  ASSERT_TRUE(ks.stages[0].parallel);
  EXPECT_EQ(count_parallel_loops(schedule::lower(plan, ks, "par").body), 2);  // pack, compute
  ks.stages[0].parallel = false;
  EXPECT_EQ(count_parallel_loops(schedule::lower(plan, ks, "ser").body), 0);
  check_graph({{s}, {q, k}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
}

TEST(VectorAxis, HandWrittenSchedulesOnEveryAxis) {
  // Matmul vectorised along its rows (A packed along dim 0, stores scattered), and along its
  // columns with B packed: both must compute the same product.
  Tensor a = placeholder("A", dims({37, 29})), b = placeholder("B", dims({29, 45}));
  Tensor c = ops::matmul(a, b);
  for (int vaxis : {0, 1}) {
    schedule::StageAnnotation ann;
    ann.op = c->name;
    ann.vector_axis = vaxis;
    ann.vector_width = 8;
    ann.tile_reg = vaxis == 0 ? std::vector<int64_t>{16, 3} : std::vector<int64_t>{3, 16};
    ann.tile_outer = vaxis == 0 ? std::vector<int64_t>{32, 6} : std::vector<int64_t>{6, 32};
    ann.tile_reduce = {8};
    ann.pack = {vaxis == 0 ? "A" : "B"};
    schedule::KernelSchedule ks;
    ks.stages.push_back(ann);
    check_graph({{c}, {a, b}}, ks, /*use_jit=*/true, {1e-4, 1e-4});
    check_graph({{c}, {a, b}}, ks, /*use_jit=*/false, {1e-4, 1e-4});
  }
}

}  // namespace
}  // namespace tessera::testing
