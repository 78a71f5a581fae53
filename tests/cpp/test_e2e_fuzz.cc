// Lowering fuzz: random small shapes and random (valid) schedules must all give correct kernels.
// Schedules come from the same sampler search-based tuning uses, so every tuner candidate shape
// is exercised here.
#include <random>

#include "e2e_harness.h"
#include "ops/ops.h"
#include "schedule/random_schedule.h"

namespace tessera::testing {
namespace {

using ir::Expr;
using ir::placeholder;
using ir::Tensor;

std::vector<Expr> dims(std::vector<int64_t> d) {
  std::vector<Expr> out;
  for (int64_t x : d) out.push_back(ir::int_imm(x));
  return out;
}

void fuzz(const Graph& g, std::mt19937_64& rng, int schedules, bool interpreter_too) {
  schedule::StagePlan plan = schedule::plan_stages(g.outputs, g.inputs);
  schedule::Target target = schedule::Target::host();
  for (int s = 0; s < schedules; ++s) {
    schedule::KernelSchedule ks = schedule::random_schedule(plan, target, rng);
    check_graph(g, ks, true, {2e-4, 2e-4});
    if (interpreter_too && s == 0) check_graph(g, ks, false, {2e-4, 2e-4});
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(E2EFuzz, MatmulRandomShapesAndSchedules) {
  std::mt19937_64 rng(2024);
  for (int c = 0; c < 12; ++c) {
    int64_t m = rng() % 40 + 1, n = rng() % 70 + 1, k = rng() % 50 + 1;
    Tensor a = placeholder("A", dims({m, k})), b = placeholder("B", dims({k, n}));
    Tensor bias = placeholder("bias", dims({n}));
    Tensor y = c % 2 ? ops::relu(ops::add(ops::matmul(a, b), bias)) : ops::matmul(a, b);
    Graph g{{y}, {a, b}};
    if (c % 2) g.inputs.push_back(bias);
    fuzz(g, rng, 4, c < 2);
  }
}

TEST(E2EFuzz, ConvRandomShapesAndSchedules) {
  std::mt19937_64 rng(77);
  for (int c = 0; c < 6; ++c) {
    int64_t groups = c % 3 == 2 ? 2 : 1;
    int64_t ci = (rng() % 3 + 1) * groups, co = (rng() % 3 + 1) * groups;
    int64_t h = rng() % 8 + 3, w = rng() % 8 + 3, kh = rng() % 3 + 1, kw = rng() % 3 + 1;
    ops::Int2 stride{int64_t(rng() % 2 + 1), int64_t(rng() % 2 + 1)};
    ops::Int2 pad{int64_t(rng() % 2), int64_t(rng() % 2)};
    Tensor x = placeholder("X", dims({1, ci, h, w}));
    Tensor wt = placeholder("W", dims({co, ci / groups, kh, kw}));
    fuzz({{ops::conv2d(x, wt, nullptr, stride, pad, {1, 1}, groups)}, {x, wt}}, rng, 3, c == 0);
  }
}

TEST(E2EFuzz, ReductionsAndElementwise) {
  std::mt19937_64 rng(5);
  for (int c = 0; c < 6; ++c) {
    int64_t a0 = rng() % 6 + 1, a1 = rng() % 40 + 1;
    Tensor x = placeholder("X", dims({a0, a1}));
    fuzz({{ops::softmax(x, -1)}, {x}}, rng, 3, c == 0);
    fuzz({{ops::reduce_sum(x, {0})}, {x}}, rng, 2, false);
    Tensor y = placeholder("Y", dims({a1}));
    fuzz({{ops::mul(ops::gelu(x), y)}, {x, y}}, rng, 2, false);
  }
}

// An elementwise output that reads a reduction through unit dims is the reduction's epilogue
// (ATen's linear is an [M, N] matmul viewed [1, M, N] before its bias and activation; a keepdim
// sum may be viewed with its unit dim elsewhere): every schedule writes the epilogue's points.
TEST(E2EFuzz, EpiloguesThroughUnitDims) {
  std::mt19937_64 rng(31);
  for (int c = 0; c < 6; ++c) {
    int64_t m = rng() % 30 + 1, n = rng() % 50 + 2, k = rng() % 40 + 1;
    Tensor x = placeholder("X", dims({m, k})), w = placeholder("W", dims({n, k}));
    Tensor bias = placeholder("bias", dims({n}));
    const std::vector<Expr> view = c % 2 ? dims({1, m, n}) : dims({m, 1, n});
    Graph g{{ops::gelu(ops::add(ops::reshape(ops::dense(x, w, nullptr), view), bias))},
            {x, w, bias}};
    ASSERT_EQ(schedule::plan_stages(g.outputs, g.inputs).stages.size(), 1u);
    fuzz(g, rng, 4, c < 2);
    Tensor rows = placeholder("R", dims({m, k}));
    Graph sums{{ops::mul(ops::reshape(ops::reduce_sum(rows, {1}, true), dims({1, m})), 2.0)},
               {rows}};
    ASSERT_EQ(schedule::plan_stages(sums.outputs, sums.inputs).stages.size(), 1u);
    fuzz(sums, rng, 3, c < 2);
  }
}

}  // namespace
}  // namespace tessera::testing
