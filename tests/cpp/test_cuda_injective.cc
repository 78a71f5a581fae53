// The GPU injective schedule (schedule/gpu/injective.h) on operators from csrc/ops: the loop nest
// it builds, its results (the nest run on the CPU block by block and thread by thread, against
// the reference interpreter) and the CUDA C emitted for it (text, and an nvcc compile).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/launch_dims.h"
#include "cuda_test_util.h"
#include "gpu_test_util.h"
#include "ir/eval.h"
#include "ir/functor.h"
#include "loop/interpreter.h"
#include "loop/stmt_functor.h"
#include "ops/elementwise.h"
#include "ops/reduction.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "schedule/gpu/injective.h"
#include "util/check.h"

namespace tessera {
namespace {

using codegen::cuda::emit_cuda;
using codegen::cuda::launch_dims;
using codegen::cuda_test::contains;
using ir::Expr;
using ir::Tensor;
using schedule::gpu::kInjectiveBlockSize;
using schedule::gpu::lower_injective;

using gpu_test::SizeValues;

loop::LoweredFunc lower_graph(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                              const std::string& name) {
  return lower_injective(schedule::plan_stages(outs, ins), name);
}

// Runs the GPU loop nest with the GPU-semantics interpreter (blocks in turn, the threads of a
// block concurrently) and compares with the reference interpreter.
void expect_matches_reference(const loop::LoweredFunc& f, const std::vector<Tensor>& outs,
                              const std::vector<Tensor>& ins, const SizeValues& sizes = {},
                              double tol = 1e-5) {
  gpu_test::expect_gpu_matches_reference(f, outs, ins, sizes, tol);
}

// Whether some expression of `s` loads from a buffer called `name`.
bool loads_from(const loop::Stmt& s, const std::string& name) {
  bool found = false;
  loop::for_each_own_expr(s, [&](const Expr& e) {
    ir::visit_expr(e, [&](const Expr& x) {
      found = found || (x->kind == ir::ExprKind::kLoad && x->buffer->name == name);
    });
  });
  for (const loop::Stmt& c : {s->body, s->then_case, s->else_case}) {
    if (c) found = found || loads_from(c, name);
  }
  for (const loop::Stmt& c : s->seq) found = found || loads_from(c, name);
  return found;
}

// The launch grid of `f` for the given sizes, as {blocks, threads} (x dimension).
std::pair<int64_t, int64_t> grid_x(const loop::LoweredFunc& f, const SizeValues& sizes = {}) {
  const codegen::cuda::LaunchDims d = launch_dims(f);
  ir::EvalEnv env;
  for (const auto& [var, value] : sizes) env.vars[var] = ir::Scalar::of_int(value);
  return {ir::evaluate(d.grid[0], env).i, ir::evaluate(d.block[0], env).i};
}

TEST(CudaInjective, ReluIsOneThreadPerElementWithATailGuard) {
  // 1000 elements: 4 blocks of 256 threads, the last 24 threads of block 3 past the end.
  Tensor x = ir::placeholder("x", {Expr(10), Expr(100)});
  Tensor y = ops::relu(x);
  loop::LoweredFunc f = lower_graph({y}, {x}, "relu_gpu");

  ASSERT_EQ(f.body->kind, loop::StmtKind::kFor);
  EXPECT_EQ(f.body->for_kind, loop::ForKind::kGpuBlockX);
  const loop::Stmt& threads = f.body->body;
  ASSERT_EQ(threads->kind, loop::StmtKind::kFor);
  EXPECT_EQ(threads->for_kind, loop::ForKind::kGpuThreadX);
  EXPECT_EQ(threads->body->kind, loop::StmtKind::kIf) << "the tail needs a bounds guard";
  EXPECT_EQ(grid_x(f), (std::pair<int64_t, int64_t>(4, kInjectiveBlockSize)));
  expect_matches_reference(f, {y}, {x});

  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "extern \"C\" __global__ void relu_gpu(float* x, float* relu)")) << src;
  EXPECT_TRUE(contains(src, "(long long)blockIdx.x;")) << src;
  EXPECT_TRUE(contains(src, "(long long)threadIdx.x;")) << src;
  EXPECT_TRUE(contains(src, "* 256LL)")) << "flat position blockIdx * block size:\n" << src;
  EXPECT_TRUE(contains(src, "< 1000LL)")) << "tail guard:\n" << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "relu");
}

TEST(CudaInjective, AddWithBroadcast) {
  Tensor a = ir::placeholder("a", {Expr(4), Expr(1), Expr(33)});
  Tensor b = ir::placeholder("b", {Expr(7), Expr(33)});
  Tensor c = ops::add(a, b);
  loop::LoweredFunc f = lower_graph({c}, {a, b}, "add_bcast");
  EXPECT_EQ(grid_x(f).first, (4 * 7 * 33 + kInjectiveBlockSize - 1) / kInjectiveBlockSize);
  expect_matches_reference(f, {c}, {a, b});
  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "float* a, float* b, float* add")) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "add_bcast");
}

TEST(CudaInjective, GeluUsesCudaErf) {
  Tensor x = ir::placeholder("x", {Expr(3), Expr(129)});
  Tensor y = ops::gelu(x);
  loop::LoweredFunc f = lower_graph({y}, {x}, "gelu_gpu");
  expect_matches_reference(f, {y}, {x});
  const std::string src = emit_cuda(f);
  EXPECT_TRUE(contains(src, "erff(")) << src;
  // Index arithmetic on non-negative values uses C's / and %, which are then floor division.
  EXPECT_TRUE(contains(src, " / 129LL)")) << src;
  EXPECT_FALSE(contains(src, "tessera_floordiv(((")) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "gelu");
}

// A chain of elementwise ops fused into one kernel, with two outputs where the second reads the
// first: each output recomputes the chain rather than reading another block's writes.
TEST(CudaInjective, FusedChainWithTwoOutputsRecomputesInsteadOfReadingBack) {
  Tensor x = ir::placeholder("x", {Expr(5), Expr(77)});
  Tensor b = ir::placeholder("bias", {Expr(77)});
  Tensor h = ops::tanh(ops::mul(ops::add(x, b), 0.5), "h");
  Tensor out1 = ops::sigmoid(h, "out1");
  Tensor out2 = ops::maximum(ops::sub(out1, h), ops::exp(ops::neg(h)), "out2");
  loop::LoweredFunc f = lower_graph({out1, out2}, {x, b}, "fused_chain");
  expect_matches_reference(f, {out1, out2}, {x, b});
  const std::string src = emit_cuda(f);
  EXPECT_FALSE(loads_from(f.body, "out1")) << "out2 reads out1's buffer:\n" << src;
  EXPECT_FALSE(loads_from(f.body, "h")) << src;
  EXPECT_TRUE(contains(src, "tanhf(")) << src;
  EXPECT_TRUE(contains(src, "tessera_fmax(")) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "fused_chain");
}

TEST(CudaInjective, SymbolicSizeBecomesAnArgumentAndSizesTheGrid) {
  ir::Var n = ir::size_var("n", 1, 1 << 20);
  Tensor x = ir::placeholder("x", {n, Expr(3)});
  Tensor y = ops::sqrt(ops::abs(x));
  loop::LoweredFunc f = lower_graph({y}, {x}, "sqrt_abs_dyn");
  ASSERT_EQ(f.size_vars.size(), 1u);
  const SizeValues sizes = {{n.get(), 300}};  // 900 elements: 4 blocks, a partial last one
  EXPECT_EQ(grid_x(f, sizes).first, 4);
  expect_matches_reference(f, {y}, {x}, sizes);
  const std::string src = emit_cuda(f);
  // The output is called "sqrt", the name of a CUDA math function: the kernel renames it.
  EXPECT_TRUE(contains(src, "float* x, float* sqrt_1, long long n)")) << src;
  TESSERA_EXPECT_NVCC_COMPILES(src, "sqrt_abs_dyn");
}

TEST(CudaInjective, ReductionIsRefused) {
  Tensor x = ir::placeholder("x", {Expr(8), Expr(16)});
  Tensor s = ops::reduce_sum(x, {1});
  EXPECT_THROW(lower_graph({s}, {x}, "sum_gpu"), Error);
}

}  // namespace
}  // namespace tessera
