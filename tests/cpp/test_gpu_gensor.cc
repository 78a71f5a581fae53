// Gensor on GPU (tune/gensor/gpu_construct.h, gpu_model.h) with the shipped H100 description:
// the model's capacity limits and bank-conflict term, and construct's choices: feasible,
// seeded, correct under the GPU interpreter, and compiled without spills.
#include <gtest/gtest.h>

#include <iostream>

#include "codegen/cuda/emit_cuda.h"
#include "cost/gpu_hardware.h"
#include "cuda_test_util.h"
#include "gpu_test_util.h"
#include "ops/conv.h"
#include "ops/linalg.h"
#include "runtime/cuda/cuda_compile.h"
#include "schedule/gpu/gpu_schedule.h"
#include "tune/gensor/gpu_construct.h"
#include "tune/gensor/gpu_model.h"

namespace tessera::tune::gensor {
namespace {

using ir::Expr;
using ir::Tensor;
using schedule::gpu::GpuTileConfig;

struct Gemm {
  Tensor a, b, c;
  schedule::StagePlan plan;
  Gemm(int64_t m, int64_t k, int64_t n)
      : a(ir::placeholder("A", {Expr(m), Expr(k)})),
        b(ir::placeholder("B", {Expr(k), Expr(n)})),
        c(ops::matmul(a, b)),
        plan(schedule::plan_stages({c}, {a, b}, schedule::gpu::gpu_plan_choices())) {}
};

GpuTileConfig config(std::vector<int64_t> vthread, std::vector<int64_t> thread,
                     std::vector<int64_t> inner, int64_t stage) {
  GpuTileConfig c;
  c.vthread = std::move(vthread);
  c.thread = std::move(thread);
  c.inner = std::move(inner);
  c.stage = {stage};
  c.unroll = {1};
  return c;
}

TEST(GpuGensorModel, VthreadsRemoveBankConflicts) {
  Gemm g(2048, 2048, 2048);
  const GpuTileSpace sp = make_gpu_tile_space(g.plan);
  ASSERT_EQ(sp.operand_axes.size(), 2u);
  const cost::GpuHardware hw = cost::h100_sxm();
  // Same 64x64 block and 4x4 points per thread; the column points either next to each other in
  // one thread (threads 4 words apart: 4-way conflicts on B's tile) or as vthreads.
  const GpuPrediction inner = predict_gpu_tiles(sp, config({1, 1}, {16, 16}, {4, 4}, 16), hw);
  const GpuPrediction vthreads = predict_gpu_tiles(sp, config({1, 4}, {16, 16}, {4, 1}, 16), hw);
  ASSERT_TRUE(inner.feasible && vthreads.feasible);
  EXPECT_EQ(inner.bank_conflict, 4);
  EXPECT_EQ(vthreads.bank_conflict, 1);
  EXPECT_LT(vthreads.shared_s, inner.shared_s);
  EXPECT_LE(vthreads.time_s, inner.time_s);
  EXPECT_EQ(inner.blocks, 32 * 32);
  EXPECT_EQ(inner.threads, 256);
}

TEST(GpuGensorModel, CapacityLimits) {
  Gemm g(2048, 2048, 2048);
  const GpuTileSpace sp = make_gpu_tile_space(g.plan);
  const cost::GpuHardware hw = cost::h100_sxm();
  EXPECT_EQ(predict_gpu_tiles(sp, config({1, 1}, {32, 64}, {1, 1}, 8), hw).why_infeasible,
            "too many threads per block");
  EXPECT_EQ(predict_gpu_tiles(sp, config({1, 1}, {16, 16}, {8, 8}, 64), hw).why_infeasible,
            "shared memory per block");
  EXPECT_EQ(predict_gpu_tiles(sp, config({1, 1}, {8, 8}, {16, 16}, 4), hw).why_infeasible,
            "registers per thread");
  // Few threads with a tiny register tile: feasible but far slower than a tiled one.
  const GpuPrediction small = predict_gpu_tiles(sp, config({1, 1}, {2, 2}, {1, 1}, 1), hw);
  const GpuPrediction tiled = predict_gpu_tiles(sp, config({1, 4}, {16, 16}, {4, 1}, 16), hw);
  ASSERT_TRUE(small.feasible);
  EXPECT_GT(small.time_s, 4 * tiled.time_s);
}

TEST(GpuGensorConstruct, Gemm2048ChoiceIsTiledAndDoesNotSpill) {
  Gemm g(2048, 2048, 2048);
  const cost::GpuHardware hw = cost::h100_sxm();
  const GpuConstructResult r = construct_gpu(g.plan, hw);
  ASSERT_TRUE(r.prediction.feasible);
  std::cout << "construct's GEMM 2048 choice: " << r.config.text() << ", predicted "
            << r.prediction.time_s * 1e3 << " ms\n";
  EXPECT_GE(r.config.threads(), 64) << r.config.text();
  EXPECT_GE(r.prediction.registers - kRegisterOverhead, 16)
      << "a register tile: " << r.config.text();
  EXPECT_GT(r.states_visited, 50);
  const GpuTileSpace sp = make_gpu_tile_space(g.plan);
  const GpuPrediction def = predict_gpu_tiles(sp, schedule::gpu::default_tile_config(g.plan), hw);
  EXPECT_LE(r.prediction.time_s, def.time_s) << "the default is one of the ranked candidates";
  // Seeded: the same seed gives the same choice, another seed may not.
  EXPECT_EQ(construct_gpu(g.plan, hw).config.text(), r.config.text());

  if (runtime::cuda::available_cuda_compiler() == runtime::cuda::CudaCompiler::kNone) {
    GTEST_SKIP() << "no CUDA compiler: spills not checked";
  }
  const loop::LoweredFunc f = schedule::gpu::lower_tiled_reduction(g.plan, r.config, "gemm2048");
  const runtime::cuda::CompiledCuda cu = runtime::cuda::compile_cuda(codegen::cuda::emit_cuda(f));
  if (!cu.ptxas.found) GTEST_SKIP() << "no ptxas report";
  EXPECT_EQ(cu.ptxas.spill_bytes(), 0) << r.config.text() << "\n" << cu.log;
}

TEST(GpuGensorConstruct, WithoutInterleaveNoVthreads) {
  Gemm g(512, 512, 512);
  GpuConstructOptions o;
  o.interleave = false;
  const GpuConstructResult r = construct_gpu(g.plan, cost::h100_sxm(), o);
  for (const GpuTileConfig& c : r.top) {
    if (c.text() == schedule::gpu::default_tile_config(g.plan).text()) continue;
    for (int64_t v : c.vthread) EXPECT_EQ(v, 1) << c.text();
  }
}

// Construct's choices lower to correct, race-free kernels on odd sizes.
TEST(GpuGensorConstruct, ChoicesAreCorrectUnderTheInterpreter) {
  const cost::GpuHardware hw = cost::h100_sxm();
  Gemm g(37, 29, 53);
  const GpuConstructResult mm = construct_gpu(g.plan, hw);
  gpu_test::expect_gpu_matches_reference(
      schedule::gpu::lower_tiled_reduction(g.plan, mm.config, "mm"), {g.c}, {g.a, g.b}, {}, 1e-4);

  Tensor x = ir::placeholder("x", {Expr(2), Expr(5), Expr(11), Expr(9)});
  Tensor w = ir::placeholder("w", {Expr(7), Expr(5), Expr(3), Expr(3)});
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  const schedule::StagePlan plan =
      schedule::plan_stages({y}, {x, w}, schedule::gpu::gpu_plan_choices());
  const GpuConstructResult conv = construct_gpu(plan, hw);
  gpu_test::expect_gpu_matches_reference(
      schedule::gpu::lower_tiled_reduction(plan, conv.config, "conv"), {y}, {x, w}, {}, 1e-4);
}

}  // namespace
}  // namespace tessera::tune::gensor
