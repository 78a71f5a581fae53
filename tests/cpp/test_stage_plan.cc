// Stage planning bounds what inlining builds: long or branching elementwise chains are cut into
// materialised stages before their expressions get too deep or too large to compile.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include "const_dims.h"
#include "e2e_harness.h"
#include "ir/functor.h"
#include "ops/elementwise.h"
#include "ops/extra_elementwise.h"
#include "ops/reduction.h"
#include "ops/shape.h"
#include "schedule/stage_plan.h"

namespace tessera::testing {
namespace {

using ir::Tensor;

ir::TreeSize largest_stage_body(const schedule::StagePlan& plan) {
  ir::TreeSize largest;
  for (const schedule::Stage& s : plan.stages) {
    const ir::TreeSize t = ir::tree_size(schedule::inline_body(s.op, plan.inlined));
    largest.depth = std::max(largest.depth, t.depth);
    largest.nodes = std::max(largest.nodes, t.nodes);
  }
  return largest;
}

TEST(StagePlan, ALongElementwiseChainIsCutIntoStages) {
  Tensor x = ir::placeholder("x", {ir::int_imm(37)});
  Tensor y = x;
  for (int i = 0; i < 3000; ++i) y = ops::add(y, 1.0);
  const schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  EXPECT_GT(plan.stages.size(), 3000u / schedule::kMaxInlinedDepth);
  EXPECT_LE(largest_stage_body(plan).depth, 2 * schedule::kMaxInlinedDepth);
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/true);
}

TEST(StagePlan, ABranchingChainDoesNotGrowExponentially) {
  // Each step reads the previous result twice: written out, step 40 would have 2^40 nodes.
  Tensor x = ir::placeholder("x", {ir::int_imm(19)});
  Tensor y = x;
  for (int i = 0; i < 40; ++i) y = ops::mul(y, y);
  const auto t0 = std::chrono::steady_clock::now();
  const schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  EXPECT_LE(largest_stage_body(plan).nodes, 2 * schedule::kMaxInlinedNodes);
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/true);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0) << "planning and compiling took " << s << " s";
}

TEST(StagePlan, ASizableValueReadTwiceIsComputedOnce) {
  // Each step reads the last twice, as an exact argument reduction's running fraction does
  // (sin, cos): inlined, step k would compute step 1 2^k times. Past kMaxRereadInlinedNodes a
  // step is materialised, so no stage's expression grows much beyond that bound.
  Tensor x = ir::placeholder("x", {ir::int_imm(19)});
  Tensor y = x;
  for (int i = 0; i < 12; ++i) y = ops::add(ops::mul(y, 0.5), ops::floor(ops::add(y, 0.5)));
  const schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  EXPECT_LE(largest_stage_body(plan).nodes, 2 * schedule::kMaxRereadInlinedNodes + 8);
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/true);
  // A small value read twice stays inlined: x + 1 squared is one stage.
  Tensor s = ops::add(x, 1.0);
  const schedule::StagePlan small = schedule::plan_stages({ops::mul(s, s)}, {x});
  EXPECT_EQ(small.stages.size(), 1u);
  EXPECT_TRUE(small.inlined.count(s.get()));
}

TEST(StagePlan, ABatchNormsPerChannelScaleIsComputedOncePerCall) {
  // y = x * scale[c] + shift[c], scale = rsqrt(var + eps) * gamma: both [C] vectors are
  // loop-invariant in the [N, C, H, W] result and become stages of C points; a per-channel read
  // (a reshape) still inlines into an index.
  Tensor x = ir::placeholder("x", dims({2, 24, 5, 7}));
  Tensor gamma = ir::placeholder("gamma", dims({24})), var = ir::placeholder("var", dims({24}));
  Tensor mean = ir::placeholder("mean", dims({24}));
  Tensor scale = ops::mul(ops::rsqrt(ops::add(var, 1e-5)), gamma, "scale");
  Tensor shift = ops::neg(ops::mul(mean, scale), "shift");
  auto channel = [](const Tensor& v) { return ops::reshape(v, {24, 1, 1}); };
  Tensor y = ops::add(ops::mul(x, channel(scale)), channel(shift), "y");
  const schedule::StagePlan plan = schedule::plan_stages({y}, {x, gamma, var, mean});
  std::set<std::string> staged;
  for (const schedule::Stage& s : plan.stages) staged.insert(s.op->name);
  EXPECT_EQ(staged, (std::set<std::string>{"scale", "shift", "y"}));
  check_graph({{y}, {x, gamma, var, mean}}, std::nullopt, /*use_jit=*/true);

  // Not where the consumer is no bigger: there the vector is computed where it is read.
  Tensor z = ops::add(x, 1.0, "z");
  Tensor small = ops::mul(ops::rsqrt(ops::add(var, 1e-5)), gamma, "small");
  Tensor same = ops::add(small, ops::reduce_sum(z, {0, 2, 3}), "same");
  const schedule::StagePlan flat = schedule::plan_stages({same}, {x, gamma, var});
  for (const schedule::Stage& s : flat.stages) EXPECT_NE(s.op->name, "small");
}

// R[b, q, p, n] = sum_k A[b, 3 q + p, k] * B[b, k, n] (a product over rows regrouped by residue
// mod 3) read by the output O[b, m, n] through `index(m)` in R's (q, p) dims.
Tensor regrouped_product_read_as(
    const std::function<std::vector<ir::Expr>(const ir::Expr&)>& index) {
  Tensor a = ir::placeholder("A", dims({2, 12, 5}));
  Tensor b = ir::placeholder("B", dims({2, 5, 7}));
  Tensor r = ir::reduce("R", dims({2, 4, 3, 7}), dims({5}), ir::ReduceKind::kSum,
                        [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& k) {
                          return ir::access(a, {v[0], ir::int_imm(3) * v[1] + v[2], k[0]}) *
                                 ir::access(b, {v[0], k[0], v[3]});
                        });
  return ir::compute("O", dims({2, 12, 7}), [&](const std::vector<ir::Var>& v) {
    std::vector<ir::Expr> at{v[0]};
    for (const ir::Expr& e : index(v[1])) at.push_back(e);
    at.push_back(v[2]);
    return ir::access(r, at);
  });
}

TEST(StagePlan, AReshapeOfAReductionIsItsEpilogueWritingTheOutputsBuffer) {
  const Tensor o = regrouped_product_read_as([](const ir::Expr& m) {
    return std::vector<ir::Expr>{ir::floordiv(m, ir::int_imm(3)), ir::floormod(m, ir::int_imm(3))};
  });
  const std::vector<Tensor> inputs = ir::collect_dag({o}).placeholders;
  const schedule::StagePlan plan = schedule::plan_stages({o}, inputs);
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(plan.stages[0].op->name, "R");
  EXPECT_EQ(plan.stages[0].epilogue_reshape, (schedule::AxisGroups{{0}, {1, 2}, {3}}));
  EXPECT_TRUE(plan.temporaries.empty());
  check_graph({{o}, inputs}, std::nullopt, /*use_jit=*/true);

  // (m % 3, m // 3) is a transpose of R's (q, p), not a reshape: R gets a buffer of its own.
  const Tensor t = regrouped_product_read_as([](const ir::Expr& m) {
    return std::vector<ir::Expr>{ir::floormod(m, ir::int_imm(4)), ir::floordiv(m, ir::int_imm(4))};
  });
  const schedule::StagePlan copy = schedule::plan_stages({t}, ir::collect_dag({t}).placeholders);
  EXPECT_EQ(copy.stages.size(), 2u);
  check_graph({{t}, ir::collect_dag({t}).placeholders}, std::nullopt, /*use_jit=*/true);
}

TEST(StagePlan, TreeSizeCountsSharedOperandsPerUse) {
  ir::Var v = ir::var("v");
  ir::Expr e = v;
  for (int i = 0; i < 30; ++i) e = e * e;  // a DAG of 31 nodes, a tree of 2^31 - 1
  const ir::TreeSize s = ir::tree_size(e);
  EXPECT_EQ(s.depth, 31);
  EXPECT_EQ(s.nodes, (int64_t{1} << 31) - 1);
  for (int i = 0; i < 30; ++i) e = e * e;  // 2^61 nodes: saturates
  EXPECT_EQ(ir::tree_size(e).nodes, ir::kTreeSizeLimit);
  ir::Expr deep = v;
  for (int i = 0; i < 100000; ++i) deep = deep + ir::int_imm(1);  // iterative: no overflow
  EXPECT_EQ(ir::tree_size(deep).depth, 100001);
}

}  // namespace
}  // namespace tessera::testing
