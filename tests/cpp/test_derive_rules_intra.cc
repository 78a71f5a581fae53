// The five intra-expression rules: every application evaluates equal to the original program
// on random inputs, and illegal applications are refused.
#include <gtest/gtest.h>

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

Tensor scope_named(const State& s, const std::string& name) {
  for (const Tensor& t : derive::scopes(s)) {
    if (t->name == name) return t;
  }
  ADD_FAILURE() << "no scope " << name << " in\n" << derive::to_string(s);
  return nullptr;
}

// Conv 3x3 split into inner sum over c and outer sum over (r, s): conv_in[n, f, h, w, r, s].
State split_conv(const State& conv) {
  auto split = derive::split_summation(conv, conv.outputs[0], {1, 2});
  EXPECT_TRUE(split.has_value());
  return *split;
}

// The index h + r - 1 of the inner scope's X read (dimension 2).
Expr inner_row_index(const State& s) {
  Tensor inner = scope_named(s, "conv_in");
  for (const Expr& a : derive::accesses(inner->op->body)) {
    if (a->tensor->name == "X") return a->operands[2];
  }
  ADD_FAILURE() << "no read of X";
  return Expr();
}

TEST(DeriveRulesIntra, SummationSplittingKeepsValues) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const std::vector<State> all = derive::summation_splittings(conv);
  EXPECT_EQ(all.size(), 6u);  // non-empty proper subsets of {c, r, s}
  for (const State& s : all) {
    EXPECT_EQ(derive::scopes(s).size(), 2u);
    EXPECT_LE(state_error(s, conv), kTolerance) << derive::to_string(s);
  }
}

TEST(DeriveRulesIntra, SummationSplittingRefusesIllegal) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const Tensor out = conv.outputs[0];
  EXPECT_FALSE(derive::split_summation(conv, out, {}));         // nothing outside
  EXPECT_FALSE(derive::split_summation(conv, out, {0, 1, 2}));  // nothing inside
  EXPECT_FALSE(derive::split_summation(conv, out, {0, 0}));     // repeated
  EXPECT_FALSE(derive::split_summation(conv, out, {3}));        // no such iterator
  Tensor a = ir::placeholder("A", dims({4}));
  Tensor relu = ir::compute("relu", dims({4}), [&](const std::vector<Var>& i) {
    return ir::relu(ir::access(a, {i[0]}));
  });
  EXPECT_FALSE(derive::split_summation(State{{relu}, {}}, relu, {0}));  // no summation
}

TEST(DeriveRulesIntra, VariableSubstitutionKeepsValues) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State split = split_conv(conv);
  const Tensor inner = scope_named(split, "conv_in");
  auto sub = derive::substitute_variable(split, inner, inner_row_index(split), 2);  // h
  ASSERT_TRUE(sub.has_value());
  EXPECT_LE(state_error(*sub, conv), kTolerance) << derive::to_string(*sub);
  // The new scope iterates t_h over the box of h + r - 1 + 1 = [0, 7).
  Tensor subst = scope_named(*sub, "conv_in_sub");
  ASSERT_TRUE(subst);
  EXPECT_EQ(derive::const_shape(subst), (std::vector<int64_t>{1, 4, 7, 5, 3, 3}));
  const std::vector<State> all = derive::variable_substitutions(split);
  EXPECT_EQ(all.size(), 4u);  // (h or r) in h + r - 1, (w or s) in w + s - 1
  for (const State& s : all) EXPECT_LE(state_error(s, conv), kTolerance) << derive::to_string(s);
}

TEST(DeriveRulesIntra, VariableSubstitutionRefusesIllegal) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const Tensor out = conv.outputs[0];
  // h + r - 1 mixes a traversal and a summation iterator: no bijection of traversal iterators.
  Expr mixed;
  for (const Expr& a : derive::accesses(out->op->body)) {
    if (a->tensor->name == "X") mixed = a->operands[2];
  }
  EXPECT_FALSE(derive::substitute_variable(conv, out, mixed, 2));
  EXPECT_TRUE(derive::variable_substitutions(conv).empty());
  // g[h, w] = A[2h + w] * B[h]: h has coefficient 2 and is used outside the index, so it cannot
  // be recovered from t = 2h + w; substituting w is a bijection.
  Tensor a = ir::placeholder("A", dims({20}));
  Tensor bh = ir::placeholder("B", dims({4}));
  Tensor g = ir::compute("g", dims({4, 3}), [&](const std::vector<Var>& v) {
    return ir::access(a, {v[0] * 2 + v[1]}) * ir::access(bh, {v[0]});
  });
  const State gs{{g}, {}};
  const Expr idx = derive::accesses_of(g->op->body, a)[0]->operands[0];
  EXPECT_FALSE(derive::substitute_variable(gs, g, idx, 0));
  auto ok = derive::substitute_variable(gs, g, idx, 1);
  ASSERT_TRUE(ok.has_value());
  EXPECT_LE(state_error(*ok, gs), kTolerance);
  // Without the read of B, h appears only through the index: Phi is injective and the new
  // scope is defined on the whole box t in [0, 9).
  Tensor d = ir::compute("d", dims({4, 3}), [&](const std::vector<Var>& v) {
    return ir::access(a, {v[0] * 2 + v[1]});
  });
  const State ds{{d}, {}};
  auto dense = derive::substitute_variable(ds, d, d->op->body->operands[0], 0);
  ASSERT_TRUE(dense.has_value());
  EXPECT_LE(state_error(*dense, ds), kTolerance);
  // An index that is not affine.
  Tensor m = ir::compute("m", dims({4, 3}),
                         [&](const std::vector<Var>& v) { return ir::access(a, {v[0] * v[1]}); });
  EXPECT_FALSE(derive::substitute_variable(State{{m}, {}}, m, m->op->body->operands[0], 0));
}

TEST(DeriveRulesIntra, SubstitutionReadsThroughPhi) {
  // The conv's outer sum reads the substituted scope at Phi: conv_in_sub[n, f, h + r, w, r, s].
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State split = split_conv(conv);
  auto sub =
      derive::substitute_variable(split, scope_named(split, "conv_in"), inner_row_index(split), 2);
  ASSERT_TRUE(sub);
  EXPECT_EQ(derive::scopes(*sub).size(), 2u);  // no gather scope of its own
  // Substituting in an output keeps the output's shape through a gather scope.
  Tensor a = ir::placeholder("A", dims({12}));
  Tensor g = ir::compute("g", dims({4, 3}), [&](const std::vector<Var>& v) {
    return ir::access(a, {v[0] + v[1]}) * ir::float_imm(2.0);
  });
  const State gs{{g}, {}};
  auto out = derive::substitute_variable(gs, g, g->op->body->operands[0]->operands[0], 0);
  ASSERT_TRUE(out);
  EXPECT_EQ(derive::scopes(*out).size(), 2u);
  EXPECT_EQ(out->outputs[0]->op->reduce, ir::ReduceKind::kNone);
  EXPECT_LE(state_error(*out, gs), kTolerance);
}

TEST(DeriveRulesIntra, TraversalMergingInlinesAGather) {
  // c[i] = sum(j) p[i, j] * B[j] with p[i, j] = A[i + j]: c = sum(j) A[i + j] * B[j].
  Tensor a = ir::placeholder("A", dims({7}));
  Tensor b = ir::placeholder("B", dims({3}));
  Tensor p = ir::compute("p", dims({5, 3}),
                         [&](const std::vector<Var>& v) { return ir::access(a, {v[0] + v[1]}); });
  Tensor c = ir::reduce("c", dims({5}), dims({3}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& v, const std::vector<Var>& r) {
                          return ir::access(p, {v[0], r[0]}) * ir::access(b, {r[0]});
                        });
  const State s{{c}, {}};
  auto merged = derive::merge_traversal(s, c, p);
  ASSERT_TRUE(merged);
  EXPECT_EQ(derive::scopes(*merged).size(), 1u);
  EXPECT_LE(state_error(*merged, s), kTolerance) << derive::to_string(*merged);
  EXPECT_EQ(derive::traversal_mergings(s).size(), 1u);
}

TEST(DeriveRulesIntra, TraversalMergingRefusesIllegal) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State split = split_conv(conv);
  // The inner scope sums over c: it is instantiated, not a traversal to merge.
  EXPECT_FALSE(derive::merge_traversal(split, split.outputs[0], scope_named(split, "conv_in")));
  // c[i] = p[i + 1] reads p[4] outside p's shape (0 there), where p's body would give a[4] * 2.
  Tensor a = ir::placeholder("A", dims({6}));
  Tensor p = ir::compute("p", dims({4}), [&](const std::vector<Var>& i) {
    return ir::access(a, {i[0]}) * ir::float_imm(2.0);
  });
  Tensor c = ir::compute("c", dims({4}),
                         [&](const std::vector<Var>& i) { return ir::access(p, {i[0] + 1}); });
  EXPECT_FALSE(derive::merge_traversal(State{{c}, {}}, c, p));
  // Not a producer of the consumer.
  EXPECT_FALSE(derive::merge_traversal(State{{c}, {}}, p, c));
}

// Conv after split and substitution of h: conv_in_sub reads X[.., t_h - 1, ..] with t_h in
// [0, 7); rows 0 and 6 read the zero padding.
State substituted_conv(const State& conv) {
  const State split = split_conv(conv);
  auto sub =
      derive::substitute_variable(split, scope_named(split, "conv_in"), inner_row_index(split), 2);
  EXPECT_TRUE(sub);
  return *sub;
}

TEST(DeriveRulesIntra, BoundaryTighteningDropsPaddingRows) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State sub = substituted_conv(conv);
  const Tensor inner = scope_named(sub, "conv_in_sub");
  auto tight = derive::tighten_boundary(sub, inner, false, 2, 1, 5);
  ASSERT_TRUE(tight);
  EXPECT_EQ(derive::const_shape(scope_named(*tight, "conv_in_sub"))[2], 5);
  EXPECT_LE(state_error(*tight, conv), kTolerance) << derive::to_string(*tight);
  // The enumerator finds the same tightest range.
  bool found = false;
  for (const State& s : derive::boundary_tightenings(sub)) {
    EXPECT_LE(state_error(s, conv), kTolerance);
    Tensor t = scope_named(s, "conv_in_sub");
    found |= derive::const_shape(t)[2] == 5;
  }
  EXPECT_TRUE(found);
}

TEST(DeriveRulesIntra, BoundaryTighteningRefusesIllegal) {
  const State conv = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State sub = substituted_conv(conv);
  const Tensor inner = scope_named(sub, "conv_in_sub");
  EXPECT_FALSE(derive::tighten_boundary(sub, inner, false, 2, 2, 5));  // row 1 is not padding
  EXPECT_FALSE(derive::tighten_boundary(sub, inner, false, 2, 0, 6));  // nothing removed
  EXPECT_FALSE(derive::tighten_boundary(sub, inner, true, 0, 1, 2));   // c = 0 contributes
  // The output keeps its shape even where it is zero: out[i] = A[i - 2] over [6].
  Tensor a = ir::placeholder("A", dims({4}));
  Tensor o = ir::compute("o", dims({6}),
                         [&](const std::vector<Var>& i) { return ir::access(a, {i[0] - 2}); });
  EXPECT_FALSE(derive::tighten_boundary(State{{o}, {}}, o, false, 0, 2, 5));
}

TEST(DeriveRulesIntra, BoundaryRelaxingPadsTheKernel) {
  // Conv 5x5 -> 6x6 (EinNet Figure 6): K[.., r] is 0 (padding) at r = 5.
  const State conv = conv_state(1, 2, 7, 7, 3, 5, 2);
  auto relaxed = derive::relax_boundary(conv, conv.outputs[0], true, 1, 0, 1);
  ASSERT_TRUE(relaxed);
  EXPECT_EQ(derive::const_extent(relaxed->outputs[0]->op->reduce_axes[1]), 6);
  EXPECT_LE(state_error(*relaxed, conv), kTolerance);
  const std::vector<State> all = derive::boundary_relaxings(conv);
  EXPECT_EQ(all.size(), 2u);  // r and s (c = 2 is even)
  for (const State& s : all) EXPECT_LE(state_error(s, conv), kTolerance);
  // A traversal iterator of an intermediate scope read only inside its shape.
  const State conv3 = conv_state(1, 3, 5, 5, 4, 3, 1);
  const State sub = substituted_conv(conv3);
  auto wide = derive::relax_boundary(sub, scope_named(sub, "conv_in_sub"), false, 3, 1, 2);
  ASSERT_TRUE(wide);
  EXPECT_EQ(derive::const_shape(scope_named(*wide, "conv_in_sub"))[3], 8);
  EXPECT_LE(state_error(*wide, conv3), kTolerance);
}

TEST(DeriveRulesIntra, BoundaryRelaxingRefusesIllegal) {
  // s[i] = sum(k: 0..3) A[i + k]: at k = 3, A[i + 3] is inside A for i <= 4.
  Tensor a = ir::placeholder("A", dims({8}));
  Tensor s = ir::reduce("s", dims({4}), dims({3}), ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& i, const std::vector<Var>& k) {
                          return ir::access(a, {i[0] + k[0]});
                        });
  const State st{{s}, {}};
  EXPECT_FALSE(derive::relax_boundary(st, s, true, 0, 0, 1));
  EXPECT_FALSE(derive::relax_boundary(st, s, false, 0, 0, 1));  // the output's shape is fixed
  // A max reduction: a padding 0 is not neutral.
  Tensor k = ir::placeholder("K", dims({3}));
  Tensor m = ir::reduce("m", dims({4}), dims({3}), ir::ReduceKind::kMax,
                        [&](const std::vector<Var>& i, const std::vector<Var>& r) {
                          return ir::access(a, {i[0] + r[0]}) * ir::access(k, {r[0]});
                        });
  EXPECT_FALSE(derive::relax_boundary(State{{m}, {}}, m, true, 0, 0, 1));
  // A traversal iterator whose reads reach outside the shape (c reads p[i + 1] at i = 3).
  Tensor p = ir::compute("p", dims({4}), [&](const std::vector<Var>& i) {
    return ir::access(a, {i[0]}) * ir::float_imm(2.0);
  });
  Tensor c = ir::compute("c", dims({4}),
                         [&](const std::vector<Var>& i) { return ir::access(p, {i[0] + 1}); });
  EXPECT_FALSE(derive::relax_boundary(State{{c}, {}}, p, false, 0, 0, 1));
}

}  // namespace
}  // namespace tessera
