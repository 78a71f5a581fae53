// The derivation pipeline of one expression (derive/derive_kernel.h): whatever it returns --
// a derived program that measured faster, or the original -- computes the expression's values,
// and a derived program is only returned with its measured time below the original's.
#include <gtest/gtest.h>

#include "derive/derive_kernel.h"
#include "derive_test_util.h"
#include "ops/reference.h"

namespace tessera::derive {
namespace {

TEST(DeriveKernel, ReturnsAProgramComputingTheConvolution) {
  const State conv = derivetest::conv_state(1, 16, 8, 8, 16, 3, 1);
  std::vector<ir::Tensor> inputs = ir::collect_dag(conv.outputs).placeholders;
  std::vector<int> weights;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]->name == "K") weights.push_back(static_cast<int>(i));
  }
  DeriveOptions o;
  o.weights = weights;  // read prepacked in the final check, as the backend runs them
  o.tune = compiler::TuneMode::kDefault;
  o.measure.min_time_ms = 1;
  const DeriveReport r = derive_kernel(conv.outputs, inputs, o);
  EXPECT_GT(r.derivations, 0);
  EXPECT_GT(r.states, 0u);
  EXPECT_GT(r.original_ms, 0);
  ASSERT_EQ(r.outputs.size(), 1u);
  ASSERT_EQ(r.original.size(), 1u);
  if (r.found) {
    EXPECT_FALSE(r.rules.empty());
    EXPECT_LT(r.derived_ms, r.original_ms);
  } else {
    EXPECT_TRUE(r.rules.empty());
  }
  // The returned programs never read outside a buffer (the strict interpreter would throw) and
  // compute the convolution.
  auto in = derivetest::random_inputs(conv, 9);
  const auto want = evaluate_state(conv, in);
  EXPECT_LE(derivetest::max_rel_error(ops::run_reference(r.outputs, in), want), 1e-9);
  EXPECT_LE(derivetest::max_rel_error(ops::run_reference(r.original, in), want), 1e-9);
}

}  // namespace
}  // namespace tessera::derive
