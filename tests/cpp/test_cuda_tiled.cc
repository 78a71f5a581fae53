// The tiled GPU schedule for reductions with reuse (schedule/gpu/tiled_reduction.h), the row
// schedule (row_reduction.h) and the choice between them (gpu_schedule.h): loop nests, results
// under the GPU-semantics interpreter against the reference, and CUDA C compiled with nvcc.
#include <gtest/gtest.h>

#include <string>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/launch_dims.h"
#include "cuda_test_util.h"
#include "gpu_test_util.h"
#include "ir/eval.h"
#include "loop/stmt_functor.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/reduction.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"
#include "util/check.h"

namespace tessera {
namespace {

using codegen::cuda::emit_cuda;
using codegen::cuda_test::contains;
using gpu_test::expect_gpu_matches_reference;
using ir::Expr;
using ir::Tensor;
using schedule::gpu::GpuTileConfig;

schedule::StagePlan gpu_plan(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins) {
  return schedule::plan_stages(outs, ins, schedule::gpu::gpu_plan_choices());
}

// Counts barriers and shared allocations of a loop nest.
class Census : public loop::StmtVisitor {
 public:
  int barriers = 0, shared = 0;

 protected:
  void visit_barrier(const loop::Stmt&) override { ++barriers; }
  void visit_allocate(const loop::Stmt& s) override {
    shared += s->buffer->scope == ir::MemScope::kShared;
    loop::StmtVisitor::visit_allocate(s);
  }
};

int count_barriers(const loop::Stmt& s) {
  Census c;
  c.visit(s);
  return c.barriers;
}

int count_shared(const loop::Stmt& s) {
  Census c;
  c.visit(s);
  return c.shared;
}

// Lowers with the default GPU schedule, checks it is `schedule`, runs it against the reference,
// and compiles its CUDA C.
void check_default(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                   const std::string& name, const std::string& schedule, double tol = 1e-4) {
  const schedule::StagePlan plan = gpu_plan(outs, ins);
  EXPECT_EQ(schedule::gpu::gpu_schedule_name(plan), schedule);
  const loop::LoweredFunc f = schedule::gpu::lower_gpu(plan, name);
  expect_gpu_matches_reference(f, outs, ins, {}, tol);
  const std::string src = emit_cuda(f);
  TESSERA_EXPECT_NVCC_COMPILES(src, name);
}

TEST(CudaTiled, MatmulStagesBothOperandsInSharedMemory) {
  Tensor a = ir::placeholder("A", {Expr(64), Expr(48)});
  Tensor b = ir::placeholder("B", {Expr(48), Expr(64)});
  Tensor c = ops::matmul(a, b);
  const schedule::StagePlan plan = gpu_plan({c}, {a, b});
  const GpuTileConfig cfg = schedule::gpu::default_tile_config(plan);
  EXPECT_EQ(cfg.threads(), 256) << cfg.text();
  const loop::LoweredFunc f = schedule::gpu::lower_tiled_reduction(plan, cfg, "mm");
  EXPECT_EQ(count_shared(f.body), 2) << "A and B tiles";
  EXPECT_EQ(count_barriers(f.body), 2) << "before and after the fetch";
  expect_gpu_matches_reference(f, {c}, {a, b});
  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "__shared__ float")) << src;
  EXPECT_TRUE(contains(src, "__syncthreads();")) << src;
  EXPECT_TRUE(contains(src, "#pragma unroll")) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "mm");
}

TEST(CudaTiled, OddMatmulWithTailsAndVthreads) {
  Tensor a = ir::placeholder("A", {Expr(37), Expr(29)});
  Tensor b = ir::placeholder("B", {Expr(29), Expr(53)});
  Tensor c = ops::matmul(a, b);
  const schedule::StagePlan plan = gpu_plan({c}, {a, b});
  // 2 vthreads x 4 threads x 3 points along rows, 2 x 8 x 1 along columns; steps of 6 with 5
  // left over in the last.
  GpuTileConfig cfg;
  cfg.vthread = {2, 2};
  cfg.thread = {4, 8};
  cfg.inner = {3, 1};
  cfg.stage = {6};
  cfg.unroll = {3};
  const loop::LoweredFunc f = schedule::gpu::lower_tiled_reduction(plan, cfg, "mm_odd");
  expect_gpu_matches_reference(f, {c}, {a, b});
  TESSERA_EXPECT_NVCC_COMPILES(emit_cuda(f), "mm_odd");
  check_default({c}, {a, b}, "mm_odd_default", "tiled");
}

TEST(CudaTiled, TransposedOperands) {
  Tensor a = ir::placeholder("A", {Expr(21), Expr(18)});  // [K, M]
  Tensor b = ir::placeholder("B", {Expr(33), Expr(21)});  // [N, K]
  check_default({ops::matmul(a, b, true, true)}, {a, b}, "mm_tt", "tiled");
}

TEST(CudaTiled, DenseWithBiasAndReluEpilogue) {
  Tensor x = ir::placeholder("x", {Expr(10), Expr(40)});
  Tensor w = ir::placeholder("w", {Expr(24), Expr(40)});
  Tensor bias = ir::placeholder("bias", {Expr(24)});
  Tensor y = ops::relu(ops::dense(x, w, bias), "y");
  const schedule::StagePlan plan = gpu_plan({y}, {x, w, bias});
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_TRUE(plan.stages[0].epilogue) << "bias and relu fused into the write-back";
  check_default({y}, {x, w, bias}, "dense_relu", "tiled");
}

TEST(CudaTiled, BatchMatmul) {
  Tensor a = ir::placeholder("A", {Expr(3), Expr(17), Expr(19)});
  Tensor b = ir::placeholder("B", {Expr(3), Expr(19), Expr(23)});
  check_default({ops::batch_matmul(a, b)}, {a, b}, "bmm", "tiled");
}

TEST(CudaTiled, Conv2dPaddedWithBias) {
  Tensor x = ir::placeholder("x", {Expr(2), Expr(3), Expr(9), Expr(11)});
  Tensor w = ir::placeholder("w", {Expr(5), Expr(3), Expr(3), Expr(3)});
  Tensor bias = ir::placeholder("bias", {Expr(5)});
  Tensor y = ops::conv2d(x, w, bias, {1, 1}, {1, 1});
  const schedule::StagePlan plan = gpu_plan({y}, {x, w, bias});
  ASSERT_EQ(plan.stages.size(), 1u) << "the pad is inlined into the fetch";
  const loop::LoweredFunc f = schedule::gpu::lower_gpu(plan, "conv");
  EXPECT_EQ(count_shared(f.body), 2) << "input and weight tiles";
  check_default({y}, {x, w, bias}, "conv", "tiled");
}

TEST(CudaTiled, Conv2dStridedAndGrouped) {
  Tensor x = ir::placeholder("x", {Expr(1), Expr(4), Expr(13), Expr(10)});
  Tensor w = ir::placeholder("w", {Expr(6), Expr(4), Expr(3), Expr(3)});
  check_default({ops::conv2d(x, w, nullptr, {2, 2}, {1, 0})}, {x, w}, "conv_s2", "tiled");
  // Grouped: the input channel is floordiv(oc, 3) * 2 + rc, not affine: read from global.
  Tensor wg = ir::placeholder("wg", {Expr(6), Expr(2), Expr(3), Expr(3)});
  check_default({ops::conv2d(x, wg, nullptr, {1, 1}, {1, 1}, {1, 1}, 2)}, {x, wg}, "conv_g2",
                "tiled");
}

TEST(CudaTiled, SymbolicRows) {
  const ir::Var m = ir::size_var("m", 1, 4096);
  Tensor a = ir::placeholder("A", {Expr(m), Expr(20)});
  Tensor b = ir::placeholder("B", {Expr(20), Expr(30)});
  Tensor c = ops::matmul(a, b);
  const loop::LoweredFunc f = schedule::gpu::lower_gpu({c}, {a, b}, "mm_sym");
  expect_gpu_matches_reference(f, {c}, {a, b}, {{m.get(), 45}}, 1e-4);
  TESSERA_EXPECT_NVCC_COMPILES(emit_cuda(f), "mm_sym");
}

TEST(CudaTiled, RejectsBadConfigurations) {
  Tensor a = ir::placeholder("A", {Expr(64), Expr(64)});
  Tensor b = ir::placeholder("B", {Expr(64), Expr(64)});
  const schedule::StagePlan plan = gpu_plan({ops::matmul(a, b)}, {a, b});
  GpuTileConfig cfg = schedule::gpu::default_tile_config(plan);
  GpuTileConfig bad_unroll = cfg;
  bad_unroll.stage = {6};
  bad_unroll.unroll = {4};
  EXPECT_THROW(schedule::gpu::lower_tiled_reduction(plan, bad_unroll, "x"), Error);
  GpuTileConfig too_big = cfg;
  too_big.stage = {64};
  too_big.inner = {16, 1};
  too_big.vthread = {1, 16};
  EXPECT_THROW(schedule::gpu::lower_tiled_reduction(plan, too_big, "x"), Error);
  GpuTileConfig wrong_arity = cfg;
  wrong_arity.stage = {8, 8};
  EXPECT_THROW(schedule::gpu::lower_tiled_reduction(plan, wrong_arity, "x"), Error);
}

TEST(CudaRow, SoftmaxIsOneBlockPerRow) {
  Tensor x = ir::placeholder("x", {Expr(7), Expr(100)});
  Tensor y = ops::softmax(x);
  const schedule::StagePlan plan = gpu_plan({y}, {x});
  const loop::LoweredFunc f = schedule::gpu::lower_gpu(plan, "softmax");
  const codegen::cuda::LaunchDims d = codegen::cuda::launch_dims(f);
  EXPECT_TRUE(d.grid[0]->is_const_int(7)) << "one block per row";
  EXPECT_TRUE(d.block[0]->is_const_int(128));
  check_default({y}, {x}, "softmax", "row");
}

TEST(CudaRow, SoftmaxOverALeadingAxis) {
  Tensor x = ir::placeholder("x", {Expr(33), Expr(5)});
  check_default({ops::softmax(x, 0)}, {x}, "softmax0", "row");
  check_default({ops::log_softmax(x, 0)}, {x}, "log_softmax0", "row");
}

TEST(CudaRow, SymbolicRowsAndRowLength) {
  const ir::Var n = ir::size_var("n", 1, 4096), d = ir::size_var("d", 1, 4096);
  Tensor x = ir::placeholder("x", {Expr(n), Expr(d)});
  Tensor y = ops::softmax(x);
  const loop::LoweredFunc f = schedule::gpu::lower_gpu({y}, {x}, "softmax_sym");
  ASSERT_EQ(f.size_vars.size(), 2u);
  expect_gpu_matches_reference(f, {y}, {x}, {{n.get(), 5}, {d.get(), 300}}, 1e-4);
  expect_gpu_matches_reference(f, {y}, {x}, {{n.get(), 3}, {d.get(), 7}}, 1e-4);
  TESSERA_EXPECT_NVCC_COMPILES(emit_cuda(f), "softmax_sym");
}

TEST(CudaRow, LayerNormAndSums) {
  Tensor x = ir::placeholder("x", {Expr(6), Expr(40)});
  Tensor g = ir::placeholder("gamma", {Expr(40)});
  Tensor b = ir::placeholder("beta", {Expr(40)});
  check_default({ops::layer_norm(x, 1, g, b)}, {x, g, b}, "layer_norm", "row");
  check_default({ops::reduce_sum(x, {1})}, {x}, "row_sum", "row");
  check_default({ops::reduce_max(x)}, {x}, "full_max", "row");
  check_default({ops::reduce_mean(x, {0})}, {x}, "col_mean", "row");
  // A kept dimension of extent 1 is no reuse: still one block per row.
  Tensor x3 = ir::placeholder("x3", {Expr(3), Expr(5), Expr(7)});
  check_default({ops::reduce_min(x3, {1}, true)}, {x3}, "min_keepdim", "row");
}

}  // namespace
}  // namespace tessera
