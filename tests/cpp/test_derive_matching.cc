// Operator matching through the iterator mapping table, eOperator classification, weight-only
// scopes, and lowering of a match to Tessera's matmul (checked numerically).
#include <gtest/gtest.h>

#include "derive/instantiate.h"
#include "derive/lower.h"
#include "derive/rules_intra.h"
#include "derive_test_util.h"

namespace tessera {
namespace {

using derive::DeriveContext;
using derive::OperatorKind;
using derive::State;
using derivetest::dims;
using derivetest::kTolerance;
using derivetest::state_error;
using ir::Expr;
using ir::Tensor;
using ir::Var;

derive::MatchOutcome match(const State& s, const Tensor& t, OperatorKind k,
                           const DeriveContext& ctx = {}) {
  return derive::match_operator(s, t, k, ctx);
}

// Replaces the state's (single) output by the lowering of its match and checks the values.
void expect_lowering_equal(const State& s, const derive::OperatorMatch& m) {
  const State lowered{{derive::lower_match(m)}, {}};
  EXPECT_LE(state_error(lowered, s), kTolerance) << derive::to_string(lowered);
}

TEST(DeriveMatching, MatmulInAnyLayout) {
  Tensor a = ir::placeholder("A", dims({6, 5}));
  Tensor b = ir::placeholder("B", dims({7, 5}));  // stored [N, K]: B transposed
  Tensor c = ir::reduce("c", dims({6, 7}), dims({5}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(a, {v[0], k[0]}) * ir::access(b, {v[1], k[0]});
                        });
  const State s{{c}, {}};
  auto mo = match(s, c, OperatorKind::kMatmul);
  ASSERT_TRUE(mo.match);
  EXPECT_EQ(mo.distance, 0);
  const derive::OperatorMatch& m = *mo.match;
  EXPECT_EQ(m.M * m.N * m.K, 6 * 7 * 5);
  // A is [m, k] row-major: strides (5, 1); B is read as [k, n] with strides (1, 5).
  EXPECT_EQ(m.a.tensor->name == "A" ? m.a.strides : m.b.strides, (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(m.a.tensor->name == "B" ? m.a.strides : m.b.strides, (std::vector<int64_t>{1, 5}));
  expect_lowering_equal(s, m);
  EXPECT_FALSE(match(s, c, OperatorKind::kConv2d).match);
  EXPECT_GT(match(s, c, OperatorKind::kElementwise).distance, 0);
}

TEST(DeriveMatching, BatchMatmulWithFlattenedGroups) {
  // Z[b, i, j, q] = sum(k1, k2) X[b, i, j, k1, k2] * Y[b, k1, k2, q]: m = (i, j), k = (k1, k2).
  Tensor x = ir::placeholder("X", dims({3, 2, 4, 2, 3}));
  Tensor y = ir::placeholder("Y", dims({3, 2, 3, 5}));
  Tensor z = ir::reduce("z", dims({3, 2, 4, 5}), dims({2, 3}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(x, {v[0], v[1], v[2], k[0], k[1]}) *
                                 ir::access(y, {v[0], k[0], k[1], v[3]});
                        });
  const State s{{z}, {}};
  auto mm = match(s, z, OperatorKind::kMatmul);
  EXPECT_GT(mm.distance, 0);  // b indexes both inputs and the output: no plain matmul
  auto bmm = match(s, z, OperatorKind::kBatchMatmul);
  ASSERT_TRUE(bmm.match);
  EXPECT_EQ(bmm.distance, 0);
  EXPECT_EQ(bmm.match->B, 3);
  EXPECT_EQ(bmm.match->M * bmm.match->N, 8 * 5);
  EXPECT_EQ(bmm.match->K, 6);
  expect_lowering_equal(s, *bmm.match);
}

TEST(DeriveMatching, NonBlockLayoutsAreReported) {
  // o[i, f, j] = sum(k) X[k, i, j] W[k, f]: m = (i, j) is one block in X (strides 5, 1) but not
  // in the output o (strides 30, 1): the match holds, the output needs a layout eOperator.
  Tensor x = ir::placeholder("X", dims({4, 3, 5}));
  Tensor w = ir::placeholder("W", dims({4, 6}));
  Tensor o = ir::reduce("o", dims({3, 6, 5}), dims({4}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(x, {k[0], v[0], v[2]}) * ir::access(w, {k[0], v[1]});
                        });
  const State s{{o}, {}};
  auto mo = match(s, o, OperatorKind::kMatmul);
  ASSERT_TRUE(mo.match);
  EXPECT_EQ(mo.distance, 0);
  const derive::OperatorMatch& m = *mo.match;
  const derive::OperandLayout& xs = m.a.tensor->name == "X" ? m.a : m.b;
  EXPECT_FALSE(xs.needs_layout);
  EXPECT_TRUE(m.out.needs_layout);
  EXPECT_FALSE(m.out_layout_free);  // a program output keeps its layout
  expect_lowering_equal(s, m);
  // As an intermediate, the output's layout is free.
  Tensor relu = ir::compute("relu", dims({3, 6, 5}), [&](const std::vector<Var>& v) {
    return ir::relu(ir::access(o, {v[0], v[1], v[2]}));
  });
  auto inner = match(State{{relu}, {}}, o, OperatorKind::kMatmul);
  ASSERT_TRUE(inner.match);
  EXPECT_TRUE(inner.match->out_layout_free);
  EXPECT_FALSE(inner.match->out.needs_layout);
  // Z[i, k, j] read with m = (i, j): k lies between i and j, no single stride covers m.
  Tensor z = ir::placeholder("Z", dims({3, 4, 5}));
  Tensor y = ir::reduce("y", dims({3, 5, 6}), dims({4}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(z, {v[0], k[0], v[1]}) * ir::access(w, {k[0], v[2]});
                        });
  const State ys{{y}, {}};
  auto my = match(ys, y, OperatorKind::kMatmul);
  ASSERT_TRUE(my.match);
  EXPECT_EQ(my.distance, 0);
  EXPECT_TRUE((my.match->a.tensor->name == "Z" ? my.match->a : my.match->b).needs_layout);
  expect_lowering_equal(ys, *my.match);
}

TEST(DeriveMatching, ConvWithAttributes) {
  Tensor x = ir::placeholder("X", dims({1, 3, 9, 9}));
  Tensor k = ir::placeholder("K", dims({4, 3, 3, 3}));
  Tensor c = derivetest::conv2d(x, k, 2, 1, 2);
  const State s{{c}, {}};
  auto mo = match(s, c, OperatorKind::kConv2d);
  ASSERT_TRUE(mo.match);
  EXPECT_EQ(mo.match->stride, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(mo.match->padding, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(mo.match->dilation, (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(mo.match->b.needs_layout);  // K is read as K[f, c, r, s]
  expect_lowering_equal(s, *mo.match);
  // As a matmul: k = (c, r, s) is not a block in X and X is read in its padding.
  EXPECT_GT(match(s, c, OperatorKind::kMatmul).distance, 0);
}

TEST(DeriveMatching, ConvWithAnOutputChannelGroup) {
  // O[n, f, a, h, w] = sum(c, r, s) X[n, c, h + r - 1, w + s - 1] * K[a, f, c, r, s]: output
  // channels (f, a) flattened, K gathered into OIHW (a layout eOperator).
  Tensor x = ir::placeholder("X", dims({2, 3, 6, 6}));
  Tensor k = ir::placeholder("K", dims({2, 4, 3, 3, 3}));
  Tensor o = ir::reduce(
      "o", dims({2, 4, 2, 6, 6}), dims({3, 3, 3}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr ih = v[3] + r[1] - 1, iw = v[4] + r[2] - 1;
        return ir::access(x, {v[0], r[0], ih, iw}) * ir::access(k, {v[2], v[1], r[0], r[1], r[2]});
      });
  const State s{{o}, {}};
  auto mo = match(s, o, OperatorKind::kConv2d);
  ASSERT_TRUE(mo.match);
  EXPECT_EQ(mo.distance, 0);
  EXPECT_EQ(mo.match->conv.w_shape, (std::vector<int64_t>{8, 3, 3, 3}));
  EXPECT_TRUE(mo.match->b.needs_layout);
  expect_lowering_equal(s, *mo.match);
  // Channels last (X[n, h, w, c]) is not ops::conv2d's layout.
  Tensor xl = ir::placeholder("XL", dims({2, 6, 6, 3}));
  Tensor ol = ir::reduce(
      "ol", dims({2, 4, 6, 6}), dims({3, 3, 3}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr ih = v[2] + r[1] - 1, iw = v[3] + r[2] - 1;
        return ir::access(xl, {v[0], ih, iw, r[0]}) * ir::access(k, {0, v[1], r[0], r[1], r[2]});
      });
  EXPECT_GT(match(State{{ol}, {}}, ol, OperatorKind::kConv2d).distance, 0);
  // An output extent that is not the convolution's (a row more than X gives).
  Tensor big = ir::reduce(
      "big", dims({2, 4, 7, 6}), dims({3, 3, 3}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        Expr ih = v[2] + r[1] - 1, iw = v[3] + r[2] - 1;
        return ir::access(x, {v[0], r[0], ih, iw}) * ir::access(k, {0, v[1], r[0], r[1], r[2]});
      });
  EXPECT_GT(match(State{{big}, {}}, big, OperatorKind::kConv2d).distance, 0);
}

TEST(DeriveMatching, ElementwiseAndEOperators) {
  Tensor a = ir::placeholder("A", dims({4, 5}));
  Tensor b = ir::placeholder("B", dims({4, 5}));
  Tensor e = ir::compute("e", dims({4, 5}), [&](const std::vector<Var>& v) {
    return ir::relu(ir::access(a, {v[0], v[1]})) + ir::access(b, {v[0], v[1]});
  });
  const State s{{e}, {}};
  auto mo = match(s, e, OperatorKind::kElementwise);
  ASSERT_TRUE(mo.match);
  EXPECT_EQ(mo.distance, 0);
  EXPECT_TRUE(derive::is_eoperator(e));  // 2 flops per point over 3 elements per point
  const auto choices = derive::instantiate(s, {});
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].role, derive::ScopeRole::kEOperator);
  // A transposed read is not elementwise.
  Tensor t = ir::compute("t", dims({5, 4}), [&](const std::vector<Var>& v) {
    return ir::access(a, {v[1], v[0]});
  });
  EXPECT_GT(match(State{{t}, {}}, t, OperatorKind::kElementwise).distance, 0);
}

TEST(DeriveMatching, ArithmeticIntensityThreshold) {
  // Matmul 32x32x32: 2*32^3 flops over 3*32^2 elements = 21 flops/element: an operator.
  Tensor a = ir::placeholder("A", dims({32, 32}));
  Tensor b = ir::placeholder("B", dims({32, 32}));
  Tensor c = ir::reduce("c", dims({32, 32}), dims({32}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(a, {v[0], k[0]}) * ir::access(b, {k[0], v[1]});
                        });
  EXPECT_NEAR(derive::scope_cost(c).intensity(), 2.0 * 32 * 32 * 32 / (3 * 32 * 32), 1e-9);
  EXPECT_FALSE(derive::is_eoperator(c));
  // K = 1: 2 flops per output over about 3 elements per output: memory-bound.
  Tensor a1 = ir::placeholder("A1", dims({32, 1}));
  Tensor b1 = ir::placeholder("B1", dims({1, 32}));
  Tensor outer = ir::reduce("outer", dims({32, 32}), dims({1}), ir::ReduceKind::kSum,
                            [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                              return ir::access(a1, {v[0], k[0]}) * ir::access(b1, {k[0], v[1]});
                            });
  EXPECT_TRUE(derive::is_eoperator(outer));
  const auto choices = derive::instantiate(State{{c}, {}}, {});
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].role, derive::ScopeRole::kOperator);
  EXPECT_EQ(choices[0].match->kind, OperatorKind::kMatmul);
}

TEST(DeriveMatching, WeightOnlyScopesAreCompileTime) {
  Tensor x = ir::placeholder("X", dims({8, 6}));
  Tensor w = ir::placeholder("W", dims({7, 6}));
  Tensor wt = ir::compute("wt", dims({6, 7}), [&](const std::vector<Var>& v) {
    return ir::access(w, {v[1], v[0]});
  });
  Tensor y = ir::reduce("y", dims({8, 7}), dims({6}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(x, {v[0], k[0]}) * ir::access(wt, {k[0], v[1]});
                        });
  DeriveContext ctx;
  ctx.weights = {w.get()};
  EXPECT_TRUE(derive::is_weight_only(w, ctx));
  EXPECT_TRUE(derive::is_weight_only(wt, ctx));
  EXPECT_FALSE(derive::is_weight_only(y, ctx));
  EXPECT_FALSE(derive::is_weight_only(wt, DeriveContext{}));
  const auto choices = derive::instantiate(State{{y}, {}}, ctx);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].role, derive::ScopeRole::kCompileTime);
  EXPECT_EQ(choices[1].role, derive::ScopeRole::kOperator);
}

}  // namespace
}  // namespace tessera
