// Row fusion: softmax and layer norm lower to one parallel loop (their stages walk the same
// rows); a chain whose consumer reads another row's result keeps separate loops. Results are
// checked against the reference interpreter either way.
#include "const_dims.h"
#include "e2e_harness.h"
#include "ir/functor.h"
#include "ops/ops.h"
#include "schedule/default_schedule.h"
#include "schedule/row_fusion.h"

namespace tessera::testing {
namespace {

using ir::placeholder;
using ir::Tensor;

int parallel_loops_of(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) {
  compiler::BuiltKernel k = compiler::build_cpu(outs, ins);
  return count_parallel_loops(k.func().body);
}

TEST(RowFusion, SoftmaxIsOneParallelLoop) {
  Tensor x = placeholder("X", dims({256, 300}));
  Tensor y = ops::softmax(x, 1);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  EXPECT_GE(plan.stages.size(), 3u);
  EXPECT_EQ(parallel_loops_of({y}, {x}), 1);
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/true);
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/false);
}

TEST(RowFusion, SoftmaxComputesExpOnce) {
  // exp(x - max) feeds the sum and the output: it is materialised once, and neither reader
  // recomputes it.
  Tensor x = placeholder("X", dims({256, 300}));
  Tensor y = ops::softmax(x, 1);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  int stages_calling_exp = 0;
  for (const schedule::Stage& st : plan.stages) {
    bool calls = false;
    ir::visit_expr(schedule::inline_body(st.op, plan.inlined), [&](const ir::Expr& e) {
      calls = calls || (e->kind == ir::ExprKind::kCall && e->call_op == ir::CallOp::kExp);
    });
    stages_calling_exp += calls ? 1 : 0;
  }
  EXPECT_EQ(stages_calling_exp, 1);
}

TEST(RowFusion, LayerNormOverTwoDimsIsOneParallelLoop) {
  Tensor x = placeholder("X", dims({16, 64, 40}));
  Tensor g = placeholder("g", dims({40})), b = placeholder("b", dims({40}));
  Tensor y = ops::layer_norm(x, 1, g, b);
  EXPECT_EQ(parallel_loops_of({y}, {x, g, b}), 1);
  check_graph({{y}, {x, g, b}}, std::nullopt, /*use_jit=*/true);
}

TEST(RowFusion, ReadingAnotherRowsResultKeepsLoopsApart) {
  // out[i, j] = x[i, j] - mean_over_i(x)[j]: the reduction's rows are the consumer's columns.
  Tensor x = placeholder("X", dims({48, 32}));
  Tensor m = ops::reduce_mean(x, {0});
  Tensor y = ops::sub(x, m);
  schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  schedule::KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
  auto groups = schedule::row_fusion_groups(plan, ks);
  EXPECT_EQ(groups.size(), plan.stages.size());
  check_graph({{y}, {x}}, std::nullopt, /*use_jit=*/true);
}

}  // namespace
}  // namespace tessera::testing
