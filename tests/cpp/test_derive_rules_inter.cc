// The three inter-expression rules: split, merge, fuse. Rewritten programs evaluate equal to
// the originals on random inputs; illegal applications are refused.
#include <gtest/gtest.h>

#include "derive/instantiate.h"
#include "derive/rules_inter.h"
#include "derive/rules_intra.h"
#include "derive_test_util.h"

namespace tessera {
namespace {

using derive::State;
using derivetest::conv_state;
using derivetest::dims;
using derivetest::kTolerance;
using derivetest::state_error;
using ir::Expr;
using ir::Tensor;
using ir::Var;

Tensor matmul(const std::string& name, const Tensor& a, const Tensor& b) {
  const int64_t m = a->shape[0]->int_value, k = a->shape[1]->int_value;
  const int64_t n = b->shape[1]->int_value;
  return ir::reduce(name, dims({m, n}), dims({k}), ir::ReduceKind::kSum,
                    [&](const std::vector<Var>& v, const std::vector<Var>& r) {
                      return ir::access(a, {v[0], r[0]}) * ir::access(b, {r[0], v[1]});
                    });
}

Tensor find_scope(const State& s, const std::string& name) {
  for (const Tensor& t : derive::scopes(s)) {
    if (t->name == name) return t;
  }
  return nullptr;
}

TEST(DeriveRulesInter, SplitExpressionKeepsValues) {
  const State conv = conv_state(1, 3, 6, 5, 4, 3, 1);
  auto split = derive::split_expression(conv, conv.outputs[0], 2, 2);  // rows [0, 2) and [2, 6)
  ASSERT_TRUE(split);
  const Tensor lo = find_scope(*split, "conv_lo"), hi = find_scope(*split, "conv_hi");
  ASSERT_TRUE(lo && hi);
  EXPECT_EQ(derive::const_shape(lo)[2], 2);
  EXPECT_EQ(derive::const_shape(hi)[2], 4);
  EXPECT_LE(state_error(*split, conv), kTolerance) << derive::to_string(*split);
  const std::vector<State> all = derive::expression_splittings(conv);
  EXPECT_EQ(all.size(), 3u);  // f, h, w (n has extent 1)
  for (const State& s : all) EXPECT_LE(state_error(s, conv), kTolerance);
  // Illegal: empty parts, a summation iterator, no such iterator.
  EXPECT_FALSE(derive::split_expression(conv, conv.outputs[0], 2, 0));
  EXPECT_FALSE(derive::split_expression(conv, conv.outputs[0], 2, 6));
  EXPECT_FALSE(derive::split_expression(conv, conv.outputs[0], 4, 1));
}

TEST(DeriveRulesInter, MergeUndoesSplit) {
  const State conv = conv_state(1, 3, 6, 5, 4, 3, 1);
  auto split = derive::split_expression(conv, conv.outputs[0], 2, 2);
  ASSERT_TRUE(split);
  const Tensor lo = find_scope(*split, "conv_lo"), hi = find_scope(*split, "conv_hi");
  auto merged = derive::merge_expressions(*split, lo, hi, 2);
  ASSERT_TRUE(merged);
  EXPECT_LE(state_error(*merged, conv), kTolerance) << derive::to_string(*merged);
  // One summing scope left, over the whole height.
  int sums = 0;
  for (const Tensor& t : derive::scopes(*merged)) {
    if (t->op->reduce == ir::ReduceKind::kSum) {
      ++sums;
      EXPECT_EQ(derive::const_shape(t)[2], 6);
    }
  }
  EXPECT_EQ(sums, 1);
  // Wrong order (hi is not lo shifted by hi's extent) and another axis are refused.
  EXPECT_FALSE(derive::merge_expressions(*split, hi, lo, 2));
  EXPECT_FALSE(derive::merge_expressions(*split, lo, hi, 3));
}

TEST(DeriveRulesInter, MergeTwoMatmulsSharingAnInput) {
  // Y1 = A B1, Y2 = A B2 (EinNet Figure 3a): one matmul over [B1 B2], outputs as views.
  Tensor a = ir::placeholder("A", dims({16, 12}));
  Tensor b1 = ir::placeholder("B1", dims({12, 10}));
  Tensor b2 = ir::placeholder("B2", dims({12, 14}));
  const State s{{matmul("y1", a, b1), matmul("y2", a, b2)}, {}};
  auto merged = derive::merge_expressions(s, s.outputs[0], s.outputs[1], 1);
  ASSERT_TRUE(merged);
  EXPECT_LE(state_error(*merged, s), kTolerance) << derive::to_string(*merged);
  // The concatenated weight is compile-time, the merged product one matmul of N = 24.
  derive::DeriveContext ctx;
  ctx.weights = {b1.get(), b2.get()};
  int compile_time = 0, matmuls = 0;
  for (const auto& c : derive::instantiate(*merged, ctx)) {
    compile_time += c.role == derive::ScopeRole::kCompileTime;
    if (c.match && c.match->kind == derive::OperatorKind::kMatmul) {
      ++matmuls;
      EXPECT_EQ(c.match->N, 24);
    }
  }
  EXPECT_EQ(compile_time, 1);
  EXPECT_EQ(matmuls, 1);
  // Merging along m would need B1 and B2 read by m: refused. So is a differing computation.
  EXPECT_FALSE(derive::merge_expressions(s, s.outputs[0], s.outputs[1], 0));
  Tensor y3 = ir::reduce(
      "y3", dims({16, 14}), dims({12}), ir::ReduceKind::kSum,
      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
        return ir::access(a, {v[0], r[0]}) * ir::access(b2, {r[0], v[1]}) * ir::float_imm(2.0);
      });
  const State t{{s.outputs[0], y3}, {}};
  EXPECT_FALSE(derive::merge_expressions(t, t.outputs[0], t.outputs[1], 1));
  // Dependent expressions are not merged: q reads w = rows of y1, otherwise q has y1's form.
  const Tensor y1 = s.outputs[0];
  Tensor w = ir::compute("w", dims({12, 10}), [&](const std::vector<Var>& v) {
    return ir::access(y1, {v[0], v[1]});
  });
  Tensor q = matmul("q", a, w);
  const State u{{y1, q}, {}};
  EXPECT_FALSE(derive::merge_expressions(u, y1, q, 1));
  EXPECT_FALSE(derive::merge_expressions(u, q, y1, 1));
  // The same form without the dependency merges.
  Tensor b3 = ir::placeholder("B3", dims({12, 10}));
  const State v{{y1, matmul("q", a, b3)}, {}};
  EXPECT_TRUE(derive::merge_expressions(v, v.outputs[0], v.outputs[1], 1));
}

TEST(DeriveRulesInter, FusionUndoesSummationSplitting) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  auto split = derive::split_summation(conv, conv.outputs[0], {1, 2});
  ASSERT_TRUE(split);
  const Tensor inner = find_scope(*split, "conv_in");
  ASSERT_TRUE(inner);
  auto fused = derive::fuse_expressions(*split, split->outputs[0], inner);
  ASSERT_TRUE(fused);
  EXPECT_EQ(derive::scopes(*fused).size(), 1u);
  EXPECT_EQ(fused->outputs[0]->op->reduce_axes.size(), 3u);
  EXPECT_LE(state_error(*fused, conv), kTolerance);
  const std::vector<State> all = derive::expression_fusions(*split);
  EXPECT_EQ(all.size(), 1u);
}

TEST(DeriveRulesInter, FusionIntoAScaledConsumer) {
  // out[i] = 2 * s[i] * c[i] with s = sum over a row: one scope summing 2 * A[i, k] * c[i].
  Tensor a = ir::placeholder("A", dims({4, 6}));
  Tensor c = ir::placeholder("C", dims({4}));
  Tensor s = ir::reduce("s", dims({4}), dims({6}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(a, {v[0], k[0]});
                        });
  Tensor out = ir::compute("out", dims({4}), [&](const std::vector<Var>& v) {
    return ir::float_imm(2.0) * ir::access(s, {v[0]}) * ir::access(c, {v[0]});
  });
  const State st{{out}, {}};
  auto fused = derive::fuse_expressions(st, out, s);
  ASSERT_TRUE(fused);
  EXPECT_EQ(derive::scopes(*fused).size(), 1u);
  EXPECT_LE(state_error(*fused, st), kTolerance);
}

TEST(DeriveRulesInter, FusionRefusesIllegal) {
  Tensor a = ir::placeholder("A", dims({4, 6}));
  Tensor s = ir::reduce("s", dims({4}), dims({6}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(a, {v[0], k[0]});
                        });
  // Non-linear consumer: relu(sum) is not sum(relu).
  Tensor relu = ir::compute("relu", dims({4}), [&](const std::vector<Var>& v) {
    return ir::relu(ir::access(s, {v[0]}));
  });
  EXPECT_FALSE(derive::fuse_expressions(State{{relu}, {}}, relu, s));
  // Additive consumer: s + 1 would add 1 per summation point.
  Tensor plus = ir::compute("plus", dims({4}), [&](const std::vector<Var>& v) {
    return ir::access(s, {v[0]}) + ir::float_imm(1.0);
  });
  EXPECT_FALSE(derive::fuse_expressions(State{{plus}, {}}, plus, s));
  // A read outside s (0 there) would become a sum over A's padding... refused, not proven.
  Tensor shifted = ir::compute("shifted", dims({4}), [&](const std::vector<Var>& v) {
    return ir::access(s, {v[0] + 1}) * ir::float_imm(3.0);
  });
  EXPECT_FALSE(derive::fuse_expressions(State{{shifted}, {}}, shifted, s));
  // A max reduction does not distribute over the consumer's product.
  Tensor m = ir::reduce("m", dims({4}), dims({6}), ir::ReduceKind::kMax,
                        [&](const std::vector<Var>& v, const std::vector<Var>& k) {
                          return ir::access(a, {v[0], k[0]});
                        });
  Tensor twice = ir::compute("twice", dims({4}), [&](const std::vector<Var>& v) {
    return ir::access(m, {v[0]}) * ir::float_imm(2.0);
  });
  EXPECT_FALSE(derive::fuse_expressions(State{{twice}, {}}, twice, m));
  // Two reads of s.
  Tensor sq = ir::compute("sq", dims({4}), [&](const std::vector<Var>& v) {
    return ir::access(s, {v[0]}) * ir::access(s, {v[0]});
  });
  EXPECT_FALSE(derive::fuse_expressions(State{{sq}, {}}, sq, s));
}

}  // namespace
}  // namespace tessera
