// Layout separation of a dilated read and the G2BMM row of the matching table: EinNet's
// Longformer derivation (a dilated G2BMM becomes a regrouping eOperator plus a dilation-1 band
// product), checked rule by rule, through the search, and compiled.
#include <gtest/gtest.h>

#include "derive/choose.h"
#include "derive/config.h"
#include "derive/index_analysis.h"
#include "derive/instantiate.h"
#include "derive/rules_intra.h"
#include "derive/search.h"
#include "derive_test_util.h"
#include "schedule/stage_plan.h"

namespace tessera {
namespace {

using derive::OperatorKind;
using derive::State;
using derivetest::dims;
using derivetest::kTolerance;
using derivetest::state_error;
using ir::Expr;
using ir::Tensor;

// The read of `name` in the output scope's body.
Expr read_of(const State& s, const std::string& name) {
  for (const Expr& a : derive::accesses(s.outputs[0]->op->body)) {
    if (a->tensor->name == name) return a;
  }
  ADD_FAILURE() << "no read of " << name << " in\n" << derive::to_string(s);
  return Expr();
}

Tensor producer_named(const State& s, const std::string& name) {
  for (const Tensor& t : derive::scopes(s)) {
    if (t->name == name) return t;
  }
  return nullptr;
}

int distance(const State& s, OperatorKind kind) {
  return derive::match_operator(s, s.outputs[0], kind, {}).distance;
}

// G2BMM [2, 16, 8], band 7, B row-major ([2, 16, 8]) or k-major ([2, 8, 16]).
State g2bmm(int64_t dilation, bool k_major) {
  Tensor a = ir::placeholder("A", dims({2, 16, 8}));
  Tensor b = ir::placeholder("B", k_major ? dims({2, 8, 16}) : dims({2, 16, 8}));
  return State{{derive::g2bmm_expr(a, b, 3, dilation, k_major)}, {}};
}

class DeriveDilatedRead : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(DeriveDilatedRead, RegroupsRowsByResidueAndKeepsValues) {
  const auto [dilation, k_major] = GetParam();
  const State s = g2bmm(dilation, k_major);
  const int band_dim = k_major ? 2 : 1;
  EXPECT_EQ(distance(s, OperatorKind::kG2bmm), 1);  // a dilated band
  auto next = derive::separate_dilated_read(s, s.outputs[0], read_of(s, "B"), band_dim);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(state_error(*next, s), kTolerance) << derive::to_string(*next);
  const Tensor layout = producer_named(*next, "B_by_residue");
  ASSERT_NE(layout, nullptr) << derive::to_string(*next);
  EXPECT_EQ(layout->op->tag, "relayout");
  // B's band dim becomes (residue, quotient), innermost whatever B's layout; the quotient
  // covers the read's box: rows m // D + w - 3 for m in [0, 16), w in [0, 7).
  const std::vector<int64_t> shape = derive::const_shape(layout);
  ASSERT_EQ(shape.size(), 4u);
  EXPECT_EQ(std::vector<int64_t>(shape.begin(), shape.begin() + 2), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(shape[2], dilation);
  EXPECT_EQ(shape[3], (15 / dilation) + 6 + 1);
  // The new read never leaves the layout, and the band is unit-stride: distance 0.
  const Expr r = read_of(*next, "B_by_residue");
  EXPECT_TRUE(derive::reads_in_bounds(r)) << derive::to_string(*next);
  EXPECT_EQ(distance(*next, OperatorKind::kG2bmm), 0);
  // Nothing is left to separate: the band read is no longer affine, and the layout's own read
  // D * (n + lo) + p has its unit iterator p over one period only.
  EXPECT_TRUE(derive::dilated_read_layouts(*next).empty());
}

TEST_P(DeriveDilatedRead, RegroupingTheRowsTooLeavesAReshapeTheStagePlanWritesThrough) {
  const auto [dilation, k_major] = GetParam();
  const State s = g2bmm(dilation, k_major);
  auto next = derive::separate_dilated_read(s, s.outputs[0], read_of(s, "B"), k_major ? 2 : 1,
                                            /*split_unit=*/true);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(state_error(*next, s), kTolerance) << derive::to_string(*next);
  // The output is the reshape O[b, m, w] = O'[b, m // D, m % D, w] of the band product O', which
  // iterates (q, p) in m's place and is a dilation-1 G2BMM.
  const Tensor rows = producer_named(*next, "g2bmm_by_residue");
  ASSERT_NE(rows, nullptr) << derive::to_string(*next);
  EXPECT_EQ(derive::const_shape(rows), (std::vector<int64_t>{2, 16 / dilation, dilation, 7}));
  const derive::MatchOutcome m = derive::match_operator(*next, rows, OperatorKind::kG2bmm, {});
  ASSERT_TRUE(m.match.has_value()) << derive::to_string(*next);
  EXPECT_EQ(m.distance, 0);
  EXPECT_EQ(m.match->band_dilation, 1);
  EXPECT_EQ(schedule::reshape_groups(next->outputs[0], next->outputs[0]->op->body, rows),
            (schedule::AxisGroups{{0}, {1, 2}, {3}}));
  // Compiled: two stages, the regrouped copy and the band product writing the output's buffer
  // through the reshape; the values are the original's.
  const State padded = derive::explicit_padding(*next);
  const schedule::StagePlan plan =
      schedule::plan_stages(padded.outputs, ir::collect_dag(padded.outputs).placeholders);
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[1].op->name, "g2bmm_by_residue");
  EXPECT_EQ(plan.stages[1].epilogue_reshape, (schedule::AxisGroups{{0}, {1, 2}, {3}}));
  std::map<const ir::TensorNode*, runtime::NDArray> in;
  uint64_t seed = 3;
  for (const Tensor& p : ir::collect_dag(s.outputs).placeholders) {
    in.emplace(p.get(), runtime::NDArray::random(p->dtype, derive::const_shape(p), seed++));
  }
  EXPECT_LE(
      derivetest::max_rel_error(derive::run_compiled(*next, in), derive::evaluate_state(s, in)),
      kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Derive, DeriveDilatedRead,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Bool()));

TEST(DeriveDilatedRead, TheRowsRegroupedBandIsInstantiatedAsAG2bmm) {
  // It is a batch matmul too, but only through an im2col-sized layout copy of its band operand;
  // the G2BMM needs none. (Sizes with enough arithmetic intensity to be an operator at all.)
  Tensor a = ir::placeholder("A", dims({1, 128, 64}));
  Tensor b = ir::placeholder("B", dims({1, 128, 64}));
  const State s{{derive::g2bmm_expr(a, b, 16, 2, false)}, {}};
  auto next = derive::separate_dilated_read(s, s.outputs[0], read_of(s, "B"), 1, true);
  ASSERT_TRUE(next.has_value());
  const Tensor rows = producer_named(*next, "g2bmm_by_residue");
  ASSERT_NE(rows, nullptr) << derive::to_string(*next);
  bool instantiated = false;
  for (const derive::ScopeChoice& c : derive::instantiate(*next, {})) {
    if (c.scope != rows) continue;
    ASSERT_TRUE(c.match.has_value()) << derive::to_string(*next);
    EXPECT_EQ(c.match->kind, OperatorKind::kG2bmm);
    instantiated = true;
  }
  EXPECT_TRUE(instantiated);
}

TEST(DeriveDilatedRead, ConstantWithAResidue) {
  // O[m, w] = sum_k A[m, k] * B[m + 2 w - 3, k]: -3 = 2 * (-2) + 1, so the residue is (m + 1) % 2.
  Tensor a = ir::placeholder("A", dims({10, 4}));
  Tensor b = ir::placeholder("B", dims({10, 4}));
  const State s{{ir::reduce(
                    "band", dims({10, 3}), dims({4}), ir::ReduceKind::kSum,
                    [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& k) {
                      return ir::access(a, {v[0], k[0]}) *
                             ir::access(b, {v[0] + ir::int_imm(2) * v[1] - ir::int_imm(3), k[0]});
                    },
                    "band")},
                {}};
  // Two successors: the separation, and the separation with m regrouped too (10 = 2 * 5).
  const std::vector<State> next = derive::dilated_read_layouts(s);
  ASSERT_EQ(next.size(), 2u);
  for (const State& n : next) EXPECT_LE(state_error(n, s), kTolerance) << derive::to_string(n);
  EXPECT_TRUE(derive::reads_in_bounds(read_of(next[0], "B_by_residue")));
}

TEST(DeriveDilatedRead, RefusesWhatIsNotADilatedTraversalIndex) {
  // Every term strided (2 m + 2 w): no unit iterator to split.
  Tensor x = ir::placeholder("X", dims({40}));
  auto band = [&](int64_t m_extent, int64_t m_coef) {
    return State{{ir::compute(
                     "O", dims({m_extent, 3}),
                     [&](const std::vector<ir::Var>& v) {
                       return ir::access(x, {ir::int_imm(m_coef) * v[0] + ir::int_imm(2) * v[1]});
                     },
                     "band")},
                 {}};
  };
  EXPECT_TRUE(derive::dilated_read_layouts(band(8, 2)).empty());
  // The unit iterator's extent is below two periods (m in [0, 3) with D = 2).
  EXPECT_TRUE(derive::dilated_read_layouts(band(3, 1)).empty());
  EXPECT_FALSE(derive::dilated_read_layouts(band(4, 1)).empty());
  // A strided convolution's X[.., 2 oh + r, ..]: the unit term is a summation iterator.
  Tensor xc = ir::placeholder("X", dims({1, 2, 9, 9}));
  Tensor k = ir::placeholder("K", dims({2, 2, 3, 3}));
  const State conv{{derive::conv2d_expr(xc, k, 2, 1, 1, "conv")}, {}};
  EXPECT_TRUE(derive::dilated_read_layouts(conv).empty());
}

TEST(DeriveMatching, G2bmmRowOfTheTable) {
  EXPECT_EQ(distance(g2bmm(1, false), OperatorKind::kG2bmm), 0);
  EXPECT_EQ(distance(g2bmm(1, true), OperatorKind::kG2bmm), 0);
  const derive::MatchOutcome m =
      derive::match_operator(g2bmm(2, true), g2bmm(2, true).outputs[0], OperatorKind::kG2bmm, {});
  ASSERT_TRUE(m.match.has_value());
  EXPECT_EQ(m.match->band_dilation, 2);
  EXPECT_EQ(m.match->band_dim, 2);
  EXPECT_EQ(m.match->b.tensor->name, "B");
  // A batch matmul's n indexes B and the output alone: no row moves the band.
  Tensor a = ir::placeholder("A", dims({2, 6, 4}));
  Tensor b = ir::placeholder("B", dims({2, 4, 5}));
  const State bmm{
      {ir::reduce(
          "bmm", dims({2, 6, 5}), dims({4}), ir::ReduceKind::kSum,
          [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& k) {
            return ir::access(a, {v[0], v[1], k[0]}) * ir::access(b, {v[0], k[0], v[2]});
          },
          "bmm")},
      {}};
  EXPECT_EQ(distance(bmm, OperatorKind::kG2bmm), derive::DeriveConstants::kNoMatchDistance);
  // A convolution's window moves with a summation iterator, not with a row of the other operand.
  const State conv = derivetest::conv_state(1, 4, 6, 6, 4, 3, 1);
  EXPECT_EQ(distance(conv, OperatorKind::kG2bmm), derive::DeriveConstants::kNoMatchDistance);
}

TEST(DeriveSearch, DilatedG2bmmBecomesRegroupingPlusUnitBand) {
  for (const bool k_major : {false, true}) {
    const State s = g2bmm(2, k_major);
    const derive::SearchResult r = derive::derive_programs(s, {});
    const derive::Derivation* found = nullptr;
    for (const derive::Derivation& d : r.derivations) {
      // The separation alone, or followed by tightening the regrouped copy to B's own rows.
      if (d.target == OperatorKind::kG2bmm && d.state.trace.size() <= 2 &&
          d.state.trace[0].rfind("separate_dilated_read(g2bmm: B", 0) == 0) {
        found = &d;
      }
    }
    std::string traces;
    for (const derive::Derivation& d : r.derivations) {
      traces += derive::operator_kind_name(d.target);
      for (const std::string& t : d.state.trace) traces += " | " + t;
      traces += "\n";
    }
    ASSERT_NE(found, nullptr) << traces;
    EXPECT_LE(state_error(found->state, s), kTolerance);
    int g2bmm_operators = 0, eoperators = 0;
    for (const derive::ScopeChoice& c : found->choices) {
      g2bmm_operators += c.role == derive::ScopeRole::kOperator &&
                         c.match->kind == OperatorKind::kG2bmm && c.match->band_dilation == 1;
      eoperators += c.role == derive::ScopeRole::kEOperator && c.scope->op->tag == "relayout";
    }
    EXPECT_EQ(g2bmm_operators, 1) << derive::to_string(found->state);
    EXPECT_EQ(eoperators, 1) << derive::to_string(found->state);

    // Compiled: the regrouped copy is a stage of its own (materialised for the band product to
    // read), and the kernel computes the original's values.
    const State padded = derive::explicit_padding(found->state);
    const std::vector<Tensor> params = ir::collect_dag(padded.outputs).placeholders;
    const schedule::StagePlan plan = schedule::plan_stages(padded.outputs, params);
    bool regrouped_stage = false;
    for (const schedule::Stage& st : plan.stages) regrouped_stage |= st.op->name == "B_by_residue";
    EXPECT_TRUE(regrouped_stage);
    const schedule::StagePlan inlined =
        schedule::plan_stages(padded.outputs, params, {schedule::PadPlacement::kInline});
    EXPECT_EQ(inlined.stages.size(), plan.stages.size() - 1);
    std::map<const ir::TensorNode*, runtime::NDArray> in;
    uint64_t seed = 5;
    for (const Tensor& p : ir::collect_dag(s.outputs).placeholders) {
      in.emplace(p.get(), runtime::NDArray::random(p->dtype, derive::const_shape(p), seed++));
    }
    EXPECT_LE(derivetest::max_rel_error(derive::run_compiled(found->state, in),
                                        derive::evaluate_state(s, in)),
              kTolerance);
  }
}

}  // namespace
}  // namespace tessera
