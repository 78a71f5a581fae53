// Random tiled GPU schedules (random tile configurations on random odd-sized matmul, batch
// matmul, dense and conv2d; configurations that fit in shared memory) through the GPU-semantics
// interpreter: every one must match the reference with no race and no out-of-bounds access. Seeded,
// so a failure replays.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "codegen/cuda/emit_cuda.h"
#include "cuda_test_util.h"
#include "gpu_test_util.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/gpu/tiled_reduction.h"

namespace tessera {
namespace {

using ir::Expr;
using ir::Tensor;
using schedule::gpu::GpuTileConfig;

constexpr int kCases = 24;
constexpr uint32_t kSeed = 2026;
// Every kCompileEvery-th case is also compiled with nvcc (where there is one).
constexpr int kCompileEvery = 8;

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A random configuration of at most 256 threads for the plan's reduction.
GpuTileConfig random_config(const schedule::StagePlan& plan, std::mt19937& rng) {
  const ir::ComputeOpNode& op = *plan.stages[0].op->op;
  GpuTileConfig c;
  int64_t threads = 1;
  for (size_t a = 0; a < op.axes.size(); ++a) {
    const int64_t t = std::min<int64_t>(int64_t{1} << pick(rng, 0, 4), 256 / threads);
    threads *= t;
    c.thread.push_back(t);
    c.vthread.push_back(pick(rng, 1, 3));
    c.inner.push_back(pick(rng, 1, 3));
  }
  for (size_t r = 0; r < op.reduce_axes.size(); ++r) {
    const int64_t stage = pick(rng, 1, 8);
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= stage; ++d) {
      if (stage % d == 0) divisors.push_back(d);
    }
    c.stage.push_back(stage);
    c.unroll.push_back(divisors[pick(rng, 0, static_cast<int64_t>(divisors.size()) - 1)]);
  }
  return c;
}

struct Graph {
  std::vector<Tensor> outs, ins;
};

Graph random_graph(std::mt19937& rng) {
  const int kind = static_cast<int>(pick(rng, 0, 3));
  auto p = [](const char* n, std::vector<int64_t> dims) {
    std::vector<Expr> s;
    for (int64_t d : dims) s.push_back(Expr(d));
    return ir::placeholder(n, s);
  };
  if (kind == 0) {
    const int64_t m = pick(rng, 1, 40), k = pick(rng, 1, 40), n = pick(rng, 1, 40);
    const bool ta = pick(rng, 0, 1), tb = pick(rng, 0, 1);
    Tensor a = ta ? p("A", {k, m}) : p("A", {m, k});
    Tensor b = tb ? p("B", {n, k}) : p("B", {k, n});
    return {{ops::matmul(a, b, ta, tb)}, {a, b}};
  }
  if (kind == 1) {
    const int64_t bt = pick(rng, 1, 3), m = pick(rng, 1, 20), k = pick(rng, 1, 20),
                  n = pick(rng, 1, 20);
    Tensor a = p("A", {bt, m, k}), b = p("B", {bt, k, n});
    return {{ops::batch_matmul(a, b)}, {a, b}};
  }
  if (kind == 2) {
    const int64_t m = pick(rng, 1, 30), k = pick(rng, 1, 30), n = pick(rng, 1, 30);
    Tensor x = p("x", {m, k}), w = p("w", {n, k}), bias = p("bias", {n});
    return {{ops::relu(ops::dense(x, w, bias), "y")}, {x, w, bias}};
  }
  const int64_t groups = pick(rng, 1, 2), c = groups * pick(rng, 1, 3),
                o = groups * pick(rng, 1, 3);
  const int64_t k = pick(rng, 1, 3), stride = pick(rng, 1, 2), pad = pick(rng, 0, k - 1);
  const int64_t h = pick(rng, k, 10), w = pick(rng, k, 10);
  Tensor x = p("X", {pick(rng, 1, 2), c, h, w}), wt = p("W", {o, c / groups, k, k});
  return {{ops::conv2d(x, wt, nullptr, {stride, stride}, {pad, pad}, {1, 1}, groups)}, {x, wt}};
}

TEST(GpuScheduleFuzz, RandomTiledSchedulesAreExactAndClean) {
  std::mt19937 rng(kSeed);
  const std::optional<std::string> nvcc = codegen::cuda_test::find_nvcc();
  for (int i = 0; i < kCases; ++i) {
    const Graph g = random_graph(rng);
    const schedule::StagePlan plan =
        schedule::plan_stages(g.outs, g.ins, schedule::gpu::gpu_plan_choices());
    ASSERT_TRUE(schedule::gpu::is_tiled_reduction_plan(plan)) << "case " << i;
    GpuTileConfig c = random_config(plan, rng);
    while (schedule::gpu::tiled_shared_bytes(plan, c) > schedule::gpu::kMaxStaticSharedBytes) {
      c = random_config(plan, rng);  // over capacity: lowering rejects it (tested elsewhere)
    }
    SCOPED_TRACE("case " + std::to_string(i) + ": " + g.outs[0]->name + " " + c.text());
    const loop::LoweredFunc f =
        schedule::gpu::lower_tiled_reduction(plan, c, "fuzz" + std::to_string(i));
    gpu_test::expect_gpu_matches_reference(f, g.outs, g.ins, {}, 1e-4);
    if (i % kCompileEvery == 0 && nvcc) {
      EXPECT_EQ(codegen::cuda_test::nvcc_compile(*nvcc, codegen::cuda::emit_cuda(f), f.name), "");
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace tessera
