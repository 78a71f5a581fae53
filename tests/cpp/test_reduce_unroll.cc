// The register tiles' inner reduce loop unrolled in groups, with prefetch hints opening each group:
// generated kernels against the reference (edges along every axis, reduce tiles that do not divide
// by the unroll), where the hints point, the rule that turns both on, and the JSON fields.
#include <gtest/gtest.h>

#include "const_dims.h"
#include "e2e_harness.h"
#include "ir/eval.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/tile_prefetch.h"
#include "util/check.h"

namespace tessera::testing {
namespace {

using ir::Expr;
using ir::int_imm;
using ir::Tensor;

schedule::KernelSchedule gemm_schedule(int64_t unroll, bool prefetch, std::vector<int> s1_order,
                                       std::vector<std::string> pack) {
  schedule::StageAnnotation a;
  a.op = "C";
  a.tile_outer = {12, 64};
  a.tile_reg = {6, 32};
  a.tile_reduce = {20};
  a.vector_axis = 1;
  a.vector_width = 16;
  a.s1_order = std::move(s1_order);
  a.pack = std::move(pack);
  a.reduce_unroll = unroll;
  a.prefetch = prefetch;
  schedule::KernelSchedule ks;
  ks.stages.push_back(a);
  return ks;
}

TEST(ReduceUnroll, UnrolledHintedGemmsMatchTheReference) {
  // 50 x 77 x 40: partial row and lane tiles, and a last reduce block of 17 (groups of 8 + 1).
  Tensor a = ir::placeholder("A", dims({50, 77})), b = ir::placeholder("B", dims({77, 40}));
  Tensor c = ops::matmul(a, b, false, false, "C");
  for (auto order : {std::vector<int>{1, 0}, std::vector<int>{0, 1}}) {
    for (auto pack : {std::vector<std::string>{"B"}, std::vector<std::string>{"A", "B"}}) {
      for (int64_t unroll : {3, 8}) {
        SCOPED_TRACE(::testing::Message() << "unroll " << unroll);
        check_graph({{c}, {a, b}}, gemm_schedule(unroll, true, order, pack), /*use_jit=*/true);
      }
    }
  }
  check_graph({{c}, {a, b}}, gemm_schedule(8, false, {1, 0}, {"B"}), /*use_jit=*/true);
  check_graph({{c}, {a, b}}, gemm_schedule(8, true, {1, 0}, {"B"}), /*use_jit=*/false);
}

TEST(ReduceUnroll, EpilogueAndOutOfRangeAnnotations) {
  Tensor x = ir::placeholder("X", dims({33, 64})), w = ir::placeholder("W", dims({24, 64}));
  Tensor y = ops::relu(ops::dense(x, w));
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  schedule::Target t;
  t.vector_lanes = 16;
  t.num_threads = 2;
  schedule::KernelSchedule ks = schedule::default_schedule(plan, t);
  for (auto& s : ks.stages) {
    if (s.tile_reduce.empty()) continue;
    s.reduce_unroll = 4;
    s.prefetch = true;
  }
  check_graph({{y}, {x, w}}, ks, /*use_jit=*/true);
  for (auto& s : ks.stages) {
    if (!s.tile_reduce.empty()) s.reduce_unroll = 0;
  }
  EXPECT_THROW(schedule::lower(plan, ks, "k"), tessera::Error);
}

// Value of `e` with the given variables bound.
int64_t eval_at(const Expr& e, const std::vector<std::pair<ir::Var, int64_t>>& values) {
  ir::EvalEnv env;
  for (const auto& [v, x] : values) env.vars[v.get()] = ir::Scalar::of_int(x);
  return ir::evaluate(e, env).i;
}

TEST(TilePrefetch, HintsTheNextRowTileIntoL1AndTheNextPanelIntoL2) {
  // A 6 x 64 register tile of C = A (rows x K) * B (K x 64-wide panels): rows are the inner S1
  // loop (16 trips), panels the outer (4 trips), 128 reduce steps.
  const int64_t K = 2048, panel_elems = 2048 * 64;
  ir::Buffer A = ir::make_buffer("A", ir::DType::kFloat32, {int_imm(1 << 22)});
  ir::Buffer B = ir::make_buffer("B", ir::DType::kFloat32, {int_imm(1 << 22)});
  ir::Var jm = ir::var("j_m", 0, 3), im = ir::var("i_m", 0, 15), ir_ = ir::var("i_r", 0, 5);
  ir::Var ju = ir::var("j_u", 0, 3), lane = ir::var("j_v", 0, 15), k = ir::var("k", 0, 127);
  Expr a = ir::load(A, (im * 6 + ir_) * K + k);
  Expr b = ir::load(B, jm * panel_elems + k * 64 + ju * 16 + lane);
  schedule::TileLoops loops;
  loops.s1 = {jm, im};
  loops.s1_trips = {4, 16};
  loops.rows = {ir_};
  loops.row_trips = {6};
  loops.vector_unroll = ju;
  loops.vector_unrolls = 4;
  loops.lane = lane;
  loops.step = k;
  loops.steps = 128;
  std::vector<loop::Stmt> hints = schedule::next_tile_prefetches(a * b, loops, 16);

  std::vector<int64_t> a_rows, b_offsets;
  const int64_t at_jm = 1, at_im = 3, at_k = 40;
  const std::vector<std::pair<ir::Var, int64_t>> at = {{jm, at_jm}, {im, at_im}, {k, at_k}};
  for (const loop::Stmt& h : hints) {
    ASSERT_EQ(h->kind, loop::StmtKind::kPrefetch);
    const int64_t idx = eval_at(h->index, at);
    if (h->buffer == A) {
      EXPECT_EQ(h->cache_level, 1);
      EXPECT_EQ(idx % K, at_k);  // the same reduce step
      a_rows.push_back(idx / K);
    } else {
      ASSERT_EQ(h->buffer, B);
      EXPECT_EQ(h->cache_level, 2);
      b_offsets.push_back(idx);
    }
  }
  // One hint per row of the next row tile.
  EXPECT_EQ(a_rows, (std::vector<int64_t>{24, 25, 26, 27, 28, 29}));
  // One per line (16 floats) of the next panel's row; inner step 3 * 128 + 40 of 16 x 128
  // reaches reduce step (3 * 128 + 40) / 16 = 26 of that panel.
  std::vector<int64_t> want_b;
  for (int64_t u = 0; u < 4; ++u) want_b.push_back((at_jm + 1) * panel_elems + 26 * 64 + u * 16);
  EXPECT_EQ(b_offsets, want_b);

  // A single S1 tile has no next one.
  loops.s1_trips = {1, 1};
  EXPECT_TRUE(schedule::next_tile_prefetches(a * b, loops, 16).empty());
}

TEST(ReduceUnroll, RulesUnrollAndHintRegisterBlockedReductions) {
  schedule::Target t;
  t.vector_lanes = 16;
  t.num_threads = 2;
  auto stage_of = [&](const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) {
    schedule::KernelSchedule ks = schedule::default_schedule(schedule::plan_stages(outs, ins), t);
    return ks.stages.back();
  };
  Tensor a = ir::placeholder("A", dims({256, 256})), b = ir::placeholder("B", dims({256, 256}));
  schedule::StageAnnotation gemm = stage_of({ops::matmul(a, b)}, {a, b});
  EXPECT_EQ(gemm.reduce_unroll, 4) << gemm.to_json().dump();
  EXPECT_TRUE(gemm.prefetch) << "an unrolled register-blocked reduction hints its next panel";
  // A 3x3 convolution's innermost reduce axis has 3 steps: groups of 2, hinted as well.
  Tensor x = ir::placeholder("X", dims({1, 64, 14, 14})),
         w = ir::placeholder("W", dims({64, 64, 3, 3}));
  schedule::StageAnnotation conv = stage_of({ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w});
  EXPECT_EQ(conv.reduce_unroll, 2) << conv.to_json().dump();
  EXPECT_TRUE(conv.prefetch);
  // Unless its register tile holds too many accumulators (2 rows x 7 columns x 2 vectors).
  schedule::StageAnnotation wide = conv;
  wide.tile_reg = {1, 32, 2, 7};
  schedule::unroll_inner_reduce(wide);
  EXPECT_EQ(wide.reduce_unroll, 1);
  EXPECT_FALSE(wide.prefetch);
  // A 1x1 convolution's innermost reduce axis (the window's width) has one step: no groups.
  Tensor w1 = ir::placeholder("W1", dims({64, 64, 1, 1}));
  schedule::StageAnnotation pointwise =
      stage_of({ops::conv2d(x, w1, nullptr, {1, 1}, {0, 0})}, {x, w1});
  EXPECT_EQ(pointwise.reduce_unroll, 1) << pointwise.to_json().dump();
  EXPECT_FALSE(pointwise.prefetch) << "hints open unrolled groups; there are none";
}

TEST(ReduceUnroll, AnnotationFieldsRoundTripAndStayOutOfOldSchedules) {
  schedule::StageAnnotation a = gemm_schedule(8, true, {1, 0}, {"B"}).stages[0];
  schedule::StageAnnotation back = schedule::StageAnnotation::from_json(a.to_json());
  EXPECT_EQ(back.reduce_unroll, 8);
  EXPECT_TRUE(back.prefetch);
  a.reduce_unroll = 1;
  a.prefetch = false;
  const std::string text = a.to_json().dump();
  EXPECT_EQ(text.find("reduce_unroll"), std::string::npos) << text;
  EXPECT_EQ(text.find("prefetch"), std::string::npos) << text;
}

}  // namespace
}  // namespace tessera::testing
