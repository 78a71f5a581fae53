// Choice by measurement: explicit padding for codegen, compiled derived programs checked
// against the original, operators timed, eOperators estimated, the cheapest verified program
// chosen only when it beats the original.
#include <gtest/gtest.h>

#include "codegen/llvm/compile.h"
#include "derive/choose.h"
#include "derive_test_util.h"
#include "loop/pipeline.h"
#include "ops/reference.h"
#include "schedule/lower.h"
#include "schedule/stage_plan.h"
#include "test_llvm_util.h"
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

// Explicit padding guards a read that may leave its shape by a select and keeps its index as it
// is: the code generator masks a vector branch's loads by the condition, so a lane past the
// border is a masked-off lane of a contiguous load. Clamping the index into the shape (as this
// pass once did) made every vector read along a padded axis a gather.
TEST(DeriveChoose, ExplicitPaddingReadsAlongAPaddedAxisAreMaskedVectorLoads) {
  const State conv = derivetest::conv_state(1, 4, 6, 32, 4, 3, 1);
  const State padded = derive::explicit_padding(conv);
  const std::vector<Tensor> inputs = ir::collect_dag(padded.outputs).placeholders;
  const schedule::StagePlan plan = schedule::plan_stages(padded.outputs, inputs);
  ASSERT_EQ(plan.stages.size(), 1u);
  // The image columns (padded by 1 at both ends) on the vector lanes.
  schedule::KernelSchedule ks;
  schedule::StageAnnotation& a = ks.stages.emplace_back();
  a.op = plan.stages[0].op->name;
  a.tile_outer = {1, 4, 6, 32};
  a.tile_reg = {1, 1, 1, 16};
  a.tile_reduce = {4, 3, 3};
  a.vector_axis = 3;
  a.vector_width = 16;
  loop::LoweredFunc f = loop::prepare_for_cpu(schedule::lower(plan, ks, "padded_conv"));
  codegen::CompileOptions opts;
  opts.keep_asm = true;
  auto k = codegen::compile_cpu(f, opts);
  EXPECT_EQ(codegen::llvm_test::count_of(k->assembly(), "vgather"), 0u) << k->assembly();
  // Masked vector loads: AVX-512's zero-masked forms or AVX2's vmaskmovps, whichever the host has.
  EXPECT_GT(codegen::llvm_test::count_masked_loads(k->assembly()), 0u) << k->assembly();
  // Border lanes read nothing outside X (the JIT's buffers are exact) and compute the conv.
  auto in = derivetest::random_inputs(conv, 4);
  std::vector<runtime::NDArray> out{runtime::NDArray(ir::DType::kFloat32, {1, 4, 6, 32})};
  std::vector<void*> ptrs;
  for (const Tensor& p : inputs) ptrs.push_back(in.at(p.get()).data());
  ptrs.push_back(out[0].data());
  codegen::llvm_test::call(*k, ptrs, {});
  EXPECT_LE(derivetest::max_rel_error(out, derive::evaluate_state(conv, in)), kTolerance);
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
  // The finalists: verified, estimated faster than the original, cheapest first, the first
  // chosen.
  EXPECT_LE(c.finalists.size(), cfg.finalists);
  EXPECT_EQ(c.chosen, c.finalists.empty() ? -1 : c.finalists.front());
  for (size_t f = 0; f < c.finalists.size(); ++f) {
    const derive::DerivationCost& fc = c.costs[static_cast<size_t>(c.finalists[f])];
    EXPECT_TRUE(fc.verified);
    EXPECT_LT(fc.total_ms(), c.original_ms);
    if (f > 0) {
      EXPECT_GE(fc.total_ms(), c.costs[static_cast<size_t>(c.finalists[f - 1])].total_ms());
    }
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

// A derivation's operators are compiled and timed only where their bound (FLOPs at the FMA
// peak, with headroom) leaves it a chance against the original; the bound never exceeds the
// timing it stands in for.
TEST(DeriveChoose, TimesOperatorsOnlyWhereTheirBoundCanBeatTheOriginal) {
  const State conv = derivetest::conv_state(1, 16, 8, 8, 16, 3, 1);
  const DeriveContext ctx = derivetest::weights_named(conv, "K");
  const derive::SearchResult r = derive::derive_programs(conv, ctx);
  ASSERT_FALSE(r.derivations.empty());
  derive::ChoiceConfig cfg;
  cfg.measure = quick();
  cfg.original_ms = 1e-9;  // an original nothing can beat
  const derive::Choice unbeatable = derive::choose_by_measurement(conv, r, ctx, cfg);
  EXPECT_TRUE(unbeatable.finalists.empty());
  EXPECT_EQ(unbeatable.original_ms, cfg.original_ms);
  cfg.original_ms = 1e9;  // an original everything beats
  const derive::Choice beatable = derive::choose_by_measurement(conv, r, ctx, cfg);
  size_t with_operators = 0;
  for (size_t i = 0; i < r.derivations.size(); ++i) {
    const derive::DerivationCost& bound = unbeatable.costs[i];
    const derive::DerivationCost& timed = beatable.costs[i];
    EXPECT_FALSE(bound.operators_timed);
    EXPECT_TRUE(timed.operators_timed);
    if (bound.operator_ms == 0) continue;
    ++with_operators;
    EXPECT_GE(timed.operator_ms, bound.operator_ms) << derive::to_string(r.derivations[i].state);
    EXPECT_DOUBLE_EQ(timed.eoperator_ms, bound.eoperator_ms);
  }
  EXPECT_GT(with_operators, 0u);
  EXPECT_FALSE(beatable.finalists.empty());
}

}  // namespace
}  // namespace tessera
