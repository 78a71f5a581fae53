// Choice by measurement: explicit padding for codegen, compiled derived programs checked
// against the original, operators timed, eOperators estimated, the cheapest verified program
// chosen only when it beats the original.
#include <gtest/gtest.h>

#include "derive/choose.h"
#include "derive_test_util.h"
#include "ops/reference.h"
#include "util/check.h"

namespace tessera {
namespace {

using derive::DeriveContext;
using derive::State;
using derivetest::kTolerance;
using ir::Tensor;

runtime::MeasureOptions quick() {
  runtime::MeasureOptions m;
  m.min_time_ms = 5;
  m.min_repeats = 3;
  return m;
}

TEST(DeriveChoose, ExplicitPaddingNeverReadsOutside) {
  const State conv = derivetest::conv_state(1, 3, 5, 5, 4, 3, 1);
  const State padded = derive::explicit_padding(conv);
  auto in = derivetest::random_inputs(conv, 5);
  // The strict interpreter throws on any read outside a shape.
  const auto got = ops::run_reference(padded.outputs, in);
  EXPECT_LE(derivetest::max_rel_error(got, derive::evaluate_state(conv, in)), 1e-12);
  EXPECT_THROW(ops::run_reference(conv.outputs, in), tessera::Error);
}

TEST(DeriveChoose, CompiledDerivationsComputeTheConv) {
  const State conv = derivetest::conv_state(1, 8, 6, 6, 8, 3, 1);
  const derive::SearchResult r =
      derive::derive_programs(conv, derivetest::weights_named(conv, "K"));
  ASSERT_FALSE(r.derivations.empty());
  std::map<const ir::TensorNode*, runtime::NDArray> in;
  uint64_t seed = 3;
  for (const Tensor& p : ir::collect_dag(conv.outputs).placeholders) {
    in.emplace(p.get(), runtime::NDArray::random(p->dtype, derive::const_shape(p), seed++));
  }
  const auto want = derive::evaluate_state(conv, in);
  // A few derivations through Tessera's compiler (fp32 kernels against the fp64 reference).
  for (size_t i = 0; i < std::min<size_t>(3, r.derivations.size()); ++i) {
    const auto got = derive::run_compiled(r.derivations[i].state, in);
    EXPECT_LE(derivetest::max_rel_error(got, want), kTolerance)
        << derive::to_string(r.derivations[i].state);
  }
}

TEST(DeriveChoose, ChoosesOnlyVerifiedFasterPrograms) {
  const State conv = derivetest::conv_state(1, 64, 14, 14, 64, 3, 1);
  const DeriveContext ctx = derivetest::weights_named(conv, "K");
  const derive::SearchResult r = derive::derive_programs(conv, ctx);
  derive::ChoiceConfig cfg;
  cfg.measure = quick();
  const derive::Choice c = derive::choose_by_measurement(conv, r, ctx, cfg);
  ASSERT_EQ(c.costs.size(), r.derivations.size());
  EXPECT_GT(c.original_ms, 0);
  for (size_t i = 0; i < c.costs.size(); ++i) {
    bool has_operator = false;
    for (const auto& s : r.derivations[i].choices)
      has_operator |= s.role == derive::ScopeRole::kOperator;
    if (has_operator) {
      EXPECT_GT(c.costs[i].operator_ms, 0);
    }
    EXPECT_GE(c.costs[i].eoperator_ms, 0);
  }
  if (c.chosen >= 0) {
    const derive::DerivationCost& best = c.costs[c.chosen];
    EXPECT_TRUE(best.verified);
    EXPECT_LE(best.rel_error, cfg.tolerance);
    EXPECT_LT(best.total_ms(), c.original_ms);
  }
  std::cout << "conv3x3 64ch 14x14: original " << c.original_ms << " ms, chosen " << c.chosen;
  if (c.chosen >= 0) {
    std::cout << " (" << c.costs[c.chosen].operator_ms << " ms operators + "
              << c.costs[c.chosen].eoperator_ms << " ms eOperators estimated)\n"
              << derive::to_string(r.derivations[c.chosen].state);
  }
  std::cout << "\n";
}

}  // namespace
}  // namespace tessera
