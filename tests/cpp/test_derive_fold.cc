// Compile-time folding of weight-only scopes: the folded program computes the same values with
// the folded constants as inputs, and no weight-only scope is left.
#include <gtest/gtest.h>

#include "derive/fold.h"
#include "derive/lower.h"
#include "derive/rules_inter.h"
#include "derive/search.h"
#include "derive_test_util.h"

namespace tessera {
namespace {

using derive::DeriveContext;
using derive::State;
using derivetest::dims;
using ir::Tensor;
using ir::Var;
using runtime::NDArray;

// Folds with the weights' values from `in`, then evaluates the folded program on the
// activations of `in` plus the constants; compares with the original.
void expect_fold_keeps_values(const State& s, const DeriveContext& ctx,
                              const std::map<const ir::TensorNode*, NDArray>& in,
                              size_t expect_folded) {
  std::map<const ir::TensorNode*, NDArray> weights;
  for (const auto& [t, v] : in) {
    if (ctx.weights.count(t)) weights.emplace(t, v);
  }
  const derive::FoldedProgram f = derive::fold_compile_time(s, ctx, weights);
  EXPECT_EQ(f.constants.size(), expect_folded);
  for (const Tensor& t : derive::scopes(f.state)) {
    EXPECT_FALSE(derive::is_weight_only(t, f.ctx)) << t->name << " was not folded";
  }
  std::map<const ir::TensorNode*, NDArray> all = in;
  for (const auto& [t, v] : f.constants) all.emplace(t, v);
  EXPECT_LE(derivetest::max_rel_error(derive::evaluate_state(f.state, all),
                                      derive::evaluate_state(s, in)),
            1e-12);
}

TEST(DeriveFold, MergedWeightsBecomeOneConstant) {
  Tensor a = ir::placeholder("A", dims({16, 12}));
  Tensor b1 = ir::placeholder("B1", dims({12, 10}));
  Tensor b2 = ir::placeholder("B2", dims({12, 14}));
  auto mm = [&](const std::string& name, const Tensor& b) {
    return ir::reduce(name, dims({16, b->shape[1]->int_value}), dims({12}), ir::ReduceKind::kSum,
                      [&](const std::vector<Var>& v, const std::vector<Var>& r) {
                        return ir::access(a, {v[0], r[0]}) * ir::access(b, {r[0], v[1]});
                      });
  };
  const State s{{mm("y1", b1), mm("y2", b2)}, {}};
  auto merged = derive::merge_expressions(s, s.outputs[0], s.outputs[1], 1);
  ASSERT_TRUE(merged);
  DeriveContext ctx;
  ctx.weights = {b1.get(), b2.get()};
  expect_fold_keeps_values(*merged, ctx, derivetest::random_inputs(s, 9), 1);
}

TEST(DeriveFold, LoweredConvWeightLayoutIsFolded) {
  // The derived conv's matmul lowered to ops::matmul reads K through a layout scope
  // K'[c, (f, r, s)]: weight-only, so it is folded; the activation view of X is not.
  const State conv = derivetest::conv_state(1, 8, 5, 5, 6, 3, 1);
  DeriveContext ctx;
  for (const Tensor& p : ir::collect_dag(conv.outputs).placeholders) {
    if (p->name == "K") ctx.weights.insert(p.get());
  }
  const derive::SearchResult r = derive::derive_programs(conv, ctx);
  const derive::Derivation* found = nullptr;
  for (const derive::Derivation& d : r.derivations) {
    for (const auto& c : d.choices) {
      if (c.role == derive::ScopeRole::kOperator &&
          c.match->kind == derive::OperatorKind::kMatmul) {
        found = &d;
      }
    }
    if (found) break;
  }
  ASSERT_NE(found, nullptr);
  const derive::ScopeChoice* op = nullptr;
  for (const auto& c : found->choices) {
    if (c.role == derive::ScopeRole::kOperator) op = &c;
  }
  const State lowered = derive::replace_scope(found->state, op->scope,
                                              {derive::lower_match(*op->match), {}}, "lower");
  expect_fold_keeps_values(lowered, ctx, derivetest::random_inputs(conv, 4), 1);
  // Nothing to fold without weights.
  const derive::FoldedProgram none = derive::fold_compile_time(lowered, {}, {});
  EXPECT_TRUE(none.constants.empty());
  EXPECT_EQ(none.state.outputs[0].get(), lowered.outputs[0].get());
}

}  // namespace
}  // namespace tessera
