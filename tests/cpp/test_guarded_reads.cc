// Reads guarded by a select (padding, concatenation) keep their indices as they are: the code
// generator masks a vector branch's loads by the select's condition, so a padded row's reads are
// masked vector loads. Clamping each index instead (as lowering once did) made them gathers
// wherever the simplifier could not prove the clamp away.
#include <gtest/gtest.h>

#include <string>

#include "codegen/llvm/compile.h"
#include "const_dims.h"
#include "e2e_harness.h"
#include "loop/pipeline.h"
#include "ops/ops.h"
#include "schedule/annotation.h"
#include "schedule/default_schedule.h"
#include "schedule/lower.h"
#include "schedule/stage_plan.h"
#include "test_llvm_util.h"

namespace tessera {
namespace {

using codegen::llvm_test::count_masked_loads;
using codegen::llvm_test::count_of;

// Max pooling's padding stage (-inf around X), vectorized along its 33 padded columns by the
// rules: its first lane reads column -1 and its first rows row -1, before the start of X.
TEST(GuardedReads, PaddingRowsAreMaskedVectorLoadsNotGathers) {
  ir::Tensor x = ir::placeholder("X", testing::dims({2, 16, 32, 32}));
  ir::Tensor y = ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  schedule::StagePlan plan = schedule::plan_stages({y}, {x});
  ASSERT_EQ(plan.stages.size(), 2u);
  ASSERT_EQ(plan.stages[0].op->name, "X_pad");
  const schedule::KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
  ASSERT_EQ(ks.stages[0].vector_axis, 3);
  loop::LoweredFunc f = loop::prepare_for_cpu(schedule::lower(plan, ks, "padded_pool"));
  codegen::CompileOptions opts;
  opts.keep_asm = true;
  auto k = codegen::compile_cpu(f, opts);
  const std::string& asm_text = k->assembly();
  // The padding stage is the first parallel body, the pooling the second (its stride-2 window
  // reads are gathers of their own).
  const size_t begin = asm_text.find("_par0:"), end = asm_text.find("_par1:");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos) << asm_text;
  const std::string padding = asm_text.substr(begin, end - begin);
  EXPECT_EQ(count_of(padding, "vgather"), 0u) << padding;
  // The padded rows' reads of X: masked vector loads (AVX-512's zeroing the lanes outside X, or
  // AVX2's vmaskmovps, whichever the host has).
  EXPECT_GT(count_masked_loads(padding), 0u) << padding;
  // Border lanes read nothing outside X, and every value matches the reference.
  testing::check_graph({{y}, {x}}, ks, /*use_jit=*/true);
  testing::check_graph({{y}, {x}}, ks, /*use_jit=*/false);
}

// Channel concatenation: each branch of the select reads its own input at indices that leave
// that input's shape where the other branch is taken.
TEST(GuardedReads, ConcatenationBranchesReadOnlyWhereTaken) {
  ir::Tensor a = ir::placeholder("A", testing::dims({2, 3, 5, 17}));
  ir::Tensor b = ir::placeholder("B", testing::dims({2, 4, 5, 17}));
  ir::Tensor y = ops::concat({a, ops::relu(b)}, 1);
  testing::check_graph({{y}, {a, b}}, std::nullopt, /*use_jit=*/true);
  testing::check_graph({{y}, {a, b}}, std::nullopt, /*use_jit=*/false);
}

}  // namespace
}  // namespace tessera
