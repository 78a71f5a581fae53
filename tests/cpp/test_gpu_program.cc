// GPU programs (schedule/gpu/gpu_program.h): a plan one GPU schedule covers is one launch; other
// plans are split into the longest runs of stages a schedule covers, with temporaries between
// launches, and the launches run in turn by the GPU-semantics interpreter match the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/nn.h"
#include "ops/pool.h"
#include "ops/reduction.h"
#include "ops/shape.h"
#include "runtime/cuda/interpreter_check.h"
#include "schedule/gpu/gpu_program.h"
#include "schedule/gpu/gpu_schedule.h"
#include "schedule/plan_choices.h"
#include "schedule/stage_plan.h"
#include "util/json.h"

namespace tessera {
namespace {

using ir::Tensor;
using schedule::gpu::GpuProgram;
using schedule::gpu::lower_gpu_program;

// Every launch's buffers are distinct entries of the program's table, its inputs first.
void expect_well_formed(const GpuProgram& p) {
  const size_t table = p.buffers().size();
  for (const auto& launch : p.launches) {
    EXPECT_EQ(launch.buffers.size(), launch.func.args.size()) << launch.func.name;
    std::set<int> distinct(launch.buffers.begin(), launch.buffers.end());
    EXPECT_EQ(distinct.size(), launch.buffers.size()) << launch.func.name;
    for (int b : launch.buffers) EXPECT_LT(static_cast<size_t>(b), table);
  }
}

void expect_interpreter_passes(const std::vector<Tensor>& outs, const std::vector<Tensor>& ins,
                               const std::string& name, const std::string& schedule) {
  const runtime::cuda::InterpreterCase c = runtime::cuda::check_gpu_schedule(outs, ins, name);
  EXPECT_TRUE(c.passed()) << c.message;
  EXPECT_EQ(c.schedule, schedule);
}

TEST(GpuProgram, OneScheduleOneLaunch) {
  Tensor a = ir::placeholder("A", {19, 23}), b = ir::placeholder("B", {23, 21});
  const std::vector<Tensor> outs{ops::relu(ops::matmul(a, b))};
  const GpuProgram p = lower_gpu_program(outs, {a, b}, "mm_relu");
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_TRUE(p.temporaries.empty());
  EXPECT_EQ(p.schedule(), "tiled");
  EXPECT_EQ(p.launches[0].func.name, "mm_relu");
  EXPECT_EQ(p.launches[0].buffers, (std::vector<int>{0, 1, 2}));
  expect_interpreter_passes(outs, {a, b}, "mm_relu", "tiled");
}

// ResNet's stem in small: the pool reads the conv's output across threads, so the conv (with its
// batch norm and relu as epilogue) and the pool are two launches over one temporary.
TEST(GpuProgram, ConvThenPoolIsTwoLaunchesOverATemporary) {
  Tensor x = ir::placeholder("X", {1, 3, 12, 12}), w = ir::placeholder("W", {4, 3, 3, 3});
  Tensor scale = ir::placeholder("scale", {4, 1, 1}), shift = ir::placeholder("shift", {4, 1, 1});
  Tensor y =
      ops::relu(ops::add(ops::mul(ops::conv2d(x, w, nullptr, {1, 1}, {1, 1}), scale), shift));
  const std::vector<Tensor> outs{ops::max_pool2d(y, {3, 3}, {2, 2}, {1, 1})};
  const std::vector<Tensor> ins{x, w, scale, shift};
  const GpuProgram p = lower_gpu_program(outs, ins, "stem");
  ASSERT_EQ(p.launches.size(), 2u);
  ASSERT_EQ(p.temporaries.size(), 1u);
  expect_well_formed(p);
  // The first launch writes the temporary (table entry 5), the second reads it and writes the
  // output (entry 4).
  EXPECT_EQ(p.launches[0].buffers.back(), 5);
  EXPECT_EQ(p.launches[1].buffers.back(), 4);
  EXPECT_NE(std::find(p.launches[1].buffers.begin(), p.launches[1].buffers.end(), 5),
            p.launches[1].buffers.end());
  expect_interpreter_passes(outs, ins, "stem", "tiled+tiled");
}

// A block seam: h = x W^T + residual is an output and is layer-normalised in the same kernel.
// The matmul keeps the tiled schedule (a row kernel could take it too, without operand reuse),
// and the later launch reads h from the output buffer the first one wrote.
TEST(GpuProgram, AnOutputReadByALaterLaunchIsReadFromItsBuffer) {
  Tensor x = ir::placeholder("x", {9, 24}), w = ir::placeholder("w", {40, 24});
  Tensor r = ir::placeholder("res", {9, 40});
  Tensor g = ir::placeholder("gamma", {40}), b = ir::placeholder("beta", {40});
  Tensor h = ops::add(ops::dense(x, w, nullptr), r);
  const std::vector<Tensor> outs{h, ops::layer_norm(h, 1, g, b)};
  const std::vector<Tensor> ins{x, w, r, g, b};
  const GpuProgram p = lower_gpu_program(outs, ins, "seam");
  expect_well_formed(p);
  ASSERT_EQ(p.launches.size(), 2u);
  EXPECT_TRUE(p.temporaries.empty());
  EXPECT_EQ(p.launches[0].schedule, "tiled");
  EXPECT_EQ(p.launches[0].buffers.back(), 5);  // h, the first output
  const auto& reads = p.launches[1].buffers;
  EXPECT_NE(std::find(reads.begin(), reads.end() - 1, 5), reads.end() - 1);
  expect_interpreter_passes(outs, ins, "seam", "tiled+row");
}

// BERT's seam: the bias and residual adds inline into the norm's reads of the matmul's output.
// The norm's mean then reads the broadcast bias along every row (one reused operand); it stays
// in the row launch with the rest of the norm rather than taking a tiled launch of its own.
TEST(GpuProgram, ANormReadingABiasStaysOneRowLaunch) {
  Tensor x = ir::placeholder("x", {9, 24}), w = ir::placeholder("w", {40, 24});
  Tensor bias = ir::placeholder("bias", {40}), r = ir::placeholder("res", {9, 40});
  Tensor g = ir::placeholder("gamma", {40}), b = ir::placeholder("beta", {40});
  Tensor h = ops::add(ops::add(ops::dense(x, w, nullptr), bias), r);
  const std::vector<Tensor> outs{ops::layer_norm(h, 1, g, b)};
  const std::vector<Tensor> ins{x, w, bias, r, g, b};
  EXPECT_EQ(lower_gpu_program(outs, ins, "bert_seam").schedule(), "tiled+row");
  expect_interpreter_passes(outs, ins, "bert_seam", "tiled+row");
}

// A batch norm's per-channel scale rsqrt(var + eps) * gamma: the CPU plan hoists it into a stage
// of its own, the GPU plan inlines it so the conv stays one tiled launch.
TEST(GpuProgram, GpuPlansInlineTheInvariantsCpuPlansHoist) {
  Tensor x = ir::placeholder("X", {1, 8, 10, 10}), w = ir::placeholder("W", {8, 8, 3, 3});
  Tensor var = ir::placeholder("var", {8}), gamma = ir::placeholder("gamma", {8});
  Tensor scale = ops::reshape(ops::mul(ops::rsqrt(ops::add(var, 1e-5)), gamma), {8, 1, 1});
  const std::vector<Tensor> outs{
      ops::relu(ops::mul(ops::conv2d(x, w, nullptr, {1, 1}, {1, 1}), scale))};
  const std::vector<Tensor> ins{x, w, var, gamma};
  EXPECT_GT(schedule::plan_stages(outs, ins).stages.size(), 1u);
  const schedule::StagePlan gpu =
      schedule::plan_stages(outs, ins, schedule::gpu::gpu_plan_choices());
  EXPECT_EQ(gpu.stages.size(), 1u);
  EXPECT_EQ(lower_gpu_program(outs, ins, "conv_bn").schedule(), "tiled");
  expect_interpreter_passes(outs, ins, "conv_bn", "tiled");
}

// A layer norm as ATen decomposes it: keepdim means read back at [n, r, 0]. The row schedule
// reads a unit row dim at 0, so the whole norm is one launch.
TEST(GpuProgram, KeepdimLayerNormIsOneRowLaunch) {
  Tensor x = ir::placeholder("x", {1, 7, 50});
  Tensor g = ir::placeholder("gamma", {50}), b = ir::placeholder("beta", {50});
  Tensor mean = ops::reduce_mean(x, {2}, true);
  Tensor centred = ops::sub(x, mean);
  Tensor var = ops::reduce_mean(ops::mul(centred, centred), {2}, true);
  Tensor y = ops::add(ops::mul(ops::mul(centred, ops::rsqrt(ops::add(var, 1e-5))), g), b);
  const GpuProgram p = lower_gpu_program({y}, {x, g, b}, "ln");
  EXPECT_EQ(p.schedule(), "row");
  expect_interpreter_passes({y}, {x, g, b}, "ln", "row");
}

// ATen's linear is a matmul viewed [1, M, N] before its bias and activation: on the GPU the
// activation is the matmul's epilogue through the unit dim (one launch), as a row sum's scaled
// [1, R] view is the row launch's. The CPU plan keeps a stage for it (its lowering does not map
// such epilogues yet).
TEST(GpuProgram, AnEpilogueThroughUnitDimsIsFused) {
  Tensor x = ir::placeholder("x", {16, 24}), w = ir::placeholder("w", {40, 24});
  Tensor bias = ir::placeholder("bias", {40});
  Tensor viewed = ops::reshape(ops::dense(x, w, nullptr), {1, 16, 40});
  const std::vector<Tensor> outs{ops::gelu(ops::add(viewed, bias))};
  const std::vector<Tensor> ins{x, w, bias};
  EXPECT_EQ(schedule::plan_stages(outs, ins).stages.size(), 1u);  // the CPU's plan too
  const schedule::StagePlan gpu =
      schedule::plan_stages(outs, ins, schedule::gpu::gpu_plan_choices());
  ASSERT_EQ(gpu.stages.size(), 1u);
  EXPECT_EQ(schedule::epilogue_axis_map(gpu.stages[0]), (schedule::AxisGroups{{}, {0}, {1}}));
  expect_interpreter_passes(outs, ins, "linear_gelu", "tiled");

  Tensor rows = ir::placeholder("rows", {6, 30});
  const std::vector<Tensor> sums{ops::mul(ops::reshape(ops::reduce_sum(rows, {1}), {1, 6}), 2.0)};
  expect_interpreter_passes(sums, {rows}, "row_sum_view", "row");
  // The same rank, the unit dim moved: a keepdim [6, 1] sum viewed [1, 6].
  const std::vector<Tensor> moved{
      ops::mul(ops::reshape(ops::reduce_sum(rows, {1}, true), {1, 6}), 2.0)};
  const schedule::StagePlan plan =
      schedule::plan_stages(moved, {rows}, schedule::gpu::gpu_plan_choices());
  ASSERT_EQ(plan.stages.size(), 1u);
  EXPECT_EQ(schedule::epilogue_axis_map(plan.stages[0]), (schedule::AxisGroups{{}, {0}}));
  expect_interpreter_passes(moved, {rows}, "row_sum_moved_unit", "row");
}

TEST(GpuProgram, GpuPlanChoicesRoundTripThroughJson) {
  schedule::PlanChoices cpu;
  EXPECT_FALSE(cpu.to_json().contains("hoist"));  // CPU records keep their JSON
  const schedule::PlanChoices gpu = schedule::gpu::gpu_plan_choices();
  EXPECT_FALSE(gpu.hoist_invariants);
  EXPECT_EQ(schedule::PlanChoices::from_json(gpu.to_json()), gpu);
  EXPECT_EQ(schedule::PlanChoices::from_json(cpu.to_json()), cpu);
  EXPECT_NE(gpu.text().find("hoist=off"), std::string::npos);
  for (const schedule::PlanChoices& c : schedule::PlanChoices::all()) {
    EXPECT_TRUE(c.hoist_invariants);
  }
}

}  // namespace
}  // namespace tessera
