// Prepacked inputs (schedule/prepack.h, CompileRequest::constant_inputs): a weight packed once
// by its pack kernel, then read by the main kernel in its packed layout, gives exactly what the
// kernel that packs on every call gives, for every schedule the search space samples. Inputs
// that are not constant, not packed, or read by a second stage stay plain.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compile.h"
#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/verify.h"
#include "schedule/prepack.h"
#include "tune/common.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::compiler {
namespace {

using ir::Tensor;
using testing::dims;

// Runs `built` on random inputs (packing its prepacked inputs first with their pack kernels)
// and compares every output with the reference interpreter.
void expect_prepacked_matches_reference(const BuiltKernel& built, const testing::Graph& g) {
  std::map<const ir::TensorNode*, runtime::NDArray> by_tensor;
  std::vector<runtime::NDArray> ins, packed;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    ins.push_back(runtime::NDArray::random(g.inputs[i]->dtype,
                                           testing::concrete_shape(g.inputs[i], {}), 21 + i));
    by_tensor[g.inputs[i].get()] = ins.back();
    ptrs.push_back(ins.back().data());
  }
  for (const Prepack& p : built.prepacks()) {
    const std::vector<std::vector<int64_t>> shapes = p.kernel->arg_shapes({});
    ASSERT_EQ(shapes.size(), 2u);
    // The main kernel's argument in the input's position has the packed copy's shape.
    EXPECT_EQ(built.kernel()->arg_shapes({})[static_cast<size_t>(p.input)], shapes[1]);
    packed.emplace_back(g.inputs[static_cast<size_t>(p.input)]->dtype, shapes[1]);
    p.kernel->run({ins[static_cast<size_t>(p.input)].data(), packed.back().data()}, {});
    ptrs[static_cast<size_t>(p.input)] = packed.back().data();
  }
  std::vector<runtime::NDArray> want = ops::run_reference(g.outputs, by_tensor, {});
  std::vector<runtime::NDArray> got;
  for (const Tensor& o : g.outputs) got.emplace_back(o->dtype, testing::concrete_shape(o, {}));
  for (auto& x : got) ptrs.push_back(x.data());
  built.run(ptrs, {});
  for (size_t i = 0; i < got.size(); ++i) {
    runtime::CompareResult c = runtime::allclose(got[i], want[i], 1e-4, 1e-4);
    EXPECT_TRUE(c.ok) << c.message << "\nschedule: " << built.schedule().dump();
  }
}

testing::Graph gemm_graph() {
  Tensor a = ir::placeholder("A", dims({37, 24})), b = ir::placeholder("B", dims({24, 45}));
  return {{ops::relu(ops::matmul(a, b))}, {a, b}};
}

testing::Graph conv_graph() {
  Tensor x = ir::placeholder("X", dims({1, 5, 9, 9})),
         w = ir::placeholder("W", dims({12, 5, 3, 3}));
  return {{ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}};
}

// Every sampled schedule that packs the weight builds a prepacked pair that matches the
// reference; schedules that do not pack it leave it plain.
void check_sampled_schedules(const testing::Graph& g, int weight, int samples) {
  tune::Task task = tune::Task::create(g.outputs, g.inputs, "k");
  tune::search::SearchSpace space(task);
  std::mt19937_64 rng(7);
  int prepacked = 0;
  for (int i = 0; i < samples; ++i) {
    schedule::KernelSchedule s = space.sample(rng);
    CompileRequest req;
    req.schedule = s;
    req.constant_inputs = {weight};
    CompileResult r = compile(g.outputs, g.inputs, req);
    bool packs = false;
    for (const auto& st : s.stages) {
      for (const std::string& p : st.pack) packs = packs || p == g.inputs[weight]->name;
    }
    ASSERT_EQ(r.kernel->prepacks().size(), packs ? 1u : 0u) << s.dump();
    if (packs) {
      EXPECT_EQ(r.kernel->prepacks()[0].input, weight);
      ++prepacked;
    }
    expect_prepacked_matches_reference(*r.kernel, g);
  }
  EXPECT_GT(prepacked, 0) << "no sampled schedule packed the weight: the test checked nothing";
}

TEST(Prepack, GemmWeightMatchesReferenceForSampledSchedules) {
  check_sampled_schedules(gemm_graph(), 1, 24);
}

TEST(Prepack, ConvWeightMatchesReferenceForSampledSchedules) {
  check_sampled_schedules(conv_graph(), 1, 16);
}

TEST(Prepack, OnlyConstantInputsArePrepacked) {
  testing::Graph g = gemm_graph();
  tune::Task task = tune::Task::create(g.outputs, g.inputs, "k");
  schedule::KernelSchedule s = task.default_schedule();
  s.stages[0].pack = {"A", "B"};
  ASSERT_TRUE(tune::search::SearchSpace(task).try_lower(s)) << s.dump();
  CompileRequest req;
  req.schedule = s;
  req.constant_inputs = {1};
  CompileResult r = compile(g.outputs, g.inputs, req);
  ASSERT_EQ(r.kernel->prepacks().size(), 1u);
  EXPECT_EQ(r.kernel->prepacks()[0].input, 1);
  expect_prepacked_matches_reference(*r.kernel, g);
  req.constant_inputs = {};
  EXPECT_TRUE(compile(g.outputs, g.inputs, req).kernel->prepacks().empty());
}

TEST(Prepack, AnInputReadByTwoStagesStaysPlain) {
  // B feeds the GEMM (packed) and an elementwise output (read as it is): one packed copy
  // cannot serve both, so B is not prepackable.
  Tensor a = ir::placeholder("A", dims({16, 24})), b = ir::placeholder("B", dims({24, 32}));
  Tensor c = ops::matmul(a, b), d = ops::relu(b);
  tune::Task task = tune::Task::create({c, d}, {a, b}, "k");
  schedule::KernelSchedule s = task.default_schedule();
  for (auto& st : s.stages) {
    if (st.op == c->op->name) st.pack = {"B"};
  }
  EXPECT_TRUE(schedule::prepackable_inputs(task.plan, s, {"B"}).empty());
  EXPECT_THROW(schedule::lower_prepack(task.plan, s, "B", "pack"), tessera::Error);
}

TEST(Prepack, TunersMeasureCandidatesReadingConstantInputsPrepacked) {
  testing::Graph g = conv_graph();
  tune::Task task = tune::Task::create(g.outputs, g.inputs, "k");
  task.constant_inputs = {"W"};
  tune::search::SearchSpace space(task);
  std::mt19937_64 rng(3);
  std::vector<schedule::KernelSchedule> packing, plain;
  while (packing.size() < 2 || plain.empty()) {
    schedule::KernelSchedule s = space.sample(rng);
    (task.prepacked_inputs(s).empty() ? plain : packing).push_back(s);
  }
  std::vector<schedule::KernelSchedule> all = packing;
  all.push_back(plain.front());
  tune::MeasureConfig quick;
  quick.rounds = 1;
  quick.round_ms = 0.1;
  quick.finalists = 0;
  tune::CandidateMeasurer measurer(task, quick);
  std::vector<tune::CandidateResult> res = measurer.measure_all(all);
  ASSERT_EQ(res.size(), 3u);
  for (size_t i = 0; i < res.size(); ++i) {
    ASSERT_TRUE(res[i].ok) << res[i].error;  // verified against the reference's output
    const bool packs = i < packing.size();
    EXPECT_EQ(res[i].kernel->prepacks().size(), packs ? 1u : 0u);
    EXPECT_EQ(res[i].args != nullptr, packs);
  }
}

TEST(Prepack, ConstructModeWithConstantInputsHandsOutAPrepackedVerifiedKernel) {
  testing::Graph g = conv_graph();
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  req.constant_inputs = {1};
  CompileResult r = compile(g.outputs, g.inputs, req);
  bool packs = false;
  for (const auto& st : r.report.schedule.stages) {
    for (const std::string& p : st.pack) packs = packs || p == "W";
  }
  EXPECT_EQ(r.kernel->prepacks().size(), packs ? 1u : 0u) << r.report.schedule.dump();
  expect_prepacked_matches_reference(*r.kernel, g);
}

TEST(Prepack, ConstantInputOutOfRangeIsAnError) {
  testing::Graph g = gemm_graph();
  CompileRequest req;
  req.constant_inputs = {5};
  EXPECT_THROW(compile(g.outputs, g.inputs, req), tessera::Error);
}

}  // namespace
}  // namespace tessera::compiler
