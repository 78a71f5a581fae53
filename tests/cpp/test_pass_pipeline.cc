// The pass list: what lowering hands the code generator.
#include <gtest/gtest.h>

#include <map>

#include "ir/tensor.h"
#include "loop/pipeline.h"
#include "loop/printer.h"
#include "loop/stmt_functor.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/lower.h"

namespace tessera::loop {
namespace {

using ir::int_imm;

// Counts loops by kind, and parallel calls, in a function and its outlined bodies.
struct KindCounter : StmtVisitor {
  std::map<ForKind, int> loops;
  int calls = 0;
  void visit_for(const Stmt& s) override {
    ++loops[s->for_kind];
    StmtVisitor::visit_for(s);
  }
  void visit_parallel_call(const Stmt& s) override {
    ++calls;
    StmtVisitor::visit_parallel_call(s);
  }
};

TEST(PassPipeline, LoweredGemmIsReadyForTheCodeGenerator) {
  ir::Tensor a = ir::placeholder("A", {int_imm(96), int_imm(64)});
  ir::Tensor b = ir::placeholder("B", {int_imm(64), int_imm(80)});
  schedule::StagePlan plan = schedule::plan_stages({ops::matmul(a, b)}, {a, b});
  const LoweredFunc lowered =
      schedule::lower(plan, schedule::default_schedule(plan, schedule::Target::host()), "gemm");
  // Lowering is target-independent: unrolled and parallel loops are still loops of that kind.
  EXPECT_FALSE(lowered.cpu_ready);
  KindCounter before;
  before.visit(lowered.body);
  EXPECT_GT(before.loops[ForKind::kUnrolled], 0);
  EXPECT_GT(before.loops[ForKind::kParallel], 0);
  EXPECT_EQ(before.calls, 0);
  LoweredFunc f = prepare_for_cpu(lowered);
  EXPECT_TRUE(f.cpu_ready);
  KindCounter count;
  count.visit(f.body);
  for (const OutlinedBody& o : f.outlined) count.visit(o.body);
  EXPECT_EQ(count.loops[ForKind::kUnrolled], 0);
  EXPECT_EQ(count.loops[ForKind::kParallel], 0);
  EXPECT_GT(count.loops[ForKind::kVectorized], 0);
  EXPECT_EQ(count.calls, static_cast<int>(f.outlined.size()));
}

TEST(PassPipeline, PrepareForCpuRunsTheTargetPassesOnHandWrittenCode) {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(32)});
  Var i = ir::var("i", 0, 1), v = ir::var("v", 0, 15);
  LoweredFunc f;
  f.name = "hand";
  f.args = {a};
  f.body = make_for(i, int_imm(0), int_imm(2), ForKind::kParallel,
                    make_for(v, int_imm(0), int_imm(16), ForKind::kVectorized,
                             make_store(a, i * 16 + v, ir::Expr(1.0))));
  LoweredFunc g = prepare_for_cpu(f);
  EXPECT_TRUE(g.cpu_ready);
  EXPECT_EQ(to_string(g),
            "func hand(a: float32[32]):\n"
            "  parallel for i in [0, 2): call par0(a)\n"
            "outlined par0(i; a):\n"
            "  vectorized for v in [0, 16):\n"
            "    a[i * 16 + v] = 1.0");
}

}  // namespace
}  // namespace tessera::loop
