// loop/scalar_loops.h: which CPU-ready functions still have scalar innermost loops (and get
// LLVM's loop passes).
#include <gtest/gtest.h>

#include "loop/pipeline.h"
#include "loop/scalar_loops.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/lower.h"

namespace tessera::loop {
namespace {

using ir::int_imm;

LoweredFunc func_of(Stmt body, std::vector<Buffer> args) {
  LoweredFunc f;
  f.name = "f";
  f.args = std::move(args);
  f.body = std::move(body);
  return prepare_for_cpu(f);
}

TEST(ScalarLoops, AScalarInnermostLoopThatStoresIsFound) {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(64)});
  Var i = ir::var("i", 0, 63);
  EXPECT_TRUE(has_scalar_inner_loops(
      func_of(make_for(i, int_imm(0), int_imm(64), ForKind::kSerial, make_store(a, i, 1.0)), {a})));
}

TEST(ScalarLoops, VectorCodeAndTrivialLoopsAreNot) {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(64)});
  Var i = ir::var("i", 0, 3), v = ir::var("v", 0, 15), one = ir::var("o", 0, 0);
  // A serial loop around a vectorized one: vectorised already.
  Stmt vec =
      make_for(v, int_imm(0), int_imm(16), ForKind::kVectorized, make_store(a, i * 16 + v, 1.0));
  EXPECT_FALSE(has_scalar_inner_loops(
      func_of(make_for(i, int_imm(0), int_imm(4), ForKind::kSerial, vec), {a})));
  // A one-iteration loop is no loop.
  EXPECT_FALSE(has_scalar_inner_loops(func_of(
      make_for(one, int_imm(0), int_imm(1), ForKind::kSerial, make_store(a, one, 1.0)), {a})));
  // The same scalar loop, outlined as a parallel body, is found there.
  EXPECT_TRUE(
      has_scalar_inner_loops(func_of(make_for(i, int_imm(0), int_imm(4), ForKind::kParallel,
                                              make_for(v, int_imm(0), int_imm(16), ForKind::kSerial,
                                                       make_store(a, i * 16 + v, 1.0))),
                                     {a})));
}

TEST(ScalarLoops, TheRulesGemmIsVectorisedEverywhere) {
  ir::Tensor x = ir::placeholder("A", {int_imm(96), int_imm(64)});
  ir::Tensor y = ir::placeholder("B", {int_imm(64), int_imm(80)});
  schedule::StagePlan plan = schedule::plan_stages({ops::matmul(x, y)}, {x, y});
  EXPECT_FALSE(has_scalar_inner_loops(prepare_for_cpu(
      schedule::lower(plan, schedule::default_schedule(plan, schedule::Target::host()), "g"))));
}

}  // namespace
}  // namespace tessera::loop
