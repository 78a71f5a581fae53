// The compile call (compiler/compile.h): which schedule a request gets, and the invariant that
// each kernel is planned once and JIT-compiled once (a tuned winner is the kernel that was
// measured). Every kernel it returns is checked against the reference interpreter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/compile.h"
#include "const_dims.h"
#include "cost/peak_probe.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/parallel.h"
#include "schedule/tuning_policy.h"
#include "tune/common.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::compiler {
namespace {

using ir::Tensor;
using testing::dims;
using util::Counter;

// Runs `k` on random inputs and compares every output with the reference interpreter.
void expect_matches_reference(const CompileResult& r, const std::vector<Tensor>& outputs,
                              const std::vector<Tensor>& inputs) {
  std::map<const ir::TensorNode*, runtime::NDArray> by_tensor;
  std::vector<runtime::NDArray> ins;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ins.push_back(
        runtime::NDArray::random(inputs[i]->dtype, testing::concrete_shape(inputs[i], {}), 11 + i));
    by_tensor[inputs[i].get()] = ins.back();
    ptrs.push_back(ins.back().data());
  }
  std::vector<runtime::NDArray> want = ops::run_reference(outputs, by_tensor, {});
  std::vector<runtime::NDArray> got;
  for (const Tensor& o : outputs) got.emplace_back(o->dtype, testing::concrete_shape(o, {}));
  for (auto& g : got) ptrs.push_back(g.data());
  r.kernel->run(ptrs, {});
  for (size_t i = 0; i < got.size(); ++i) {
    runtime::CompareResult c = runtime::allclose(got[i], want[i], 1e-4, 1e-4);
    EXPECT_TRUE(c.ok) << c.message << "\nschedule: " << r.report.schedule.dump();
  }
}

struct Delta {
  std::map<std::string, double> before = util::counters_snapshot();
  double operator()(Counter c) const {
    return static_cast<double>(util::read(c)) - before.at(util::counter_name(c));
  }
};

TEST(CompileCall, DefaultRequestPlansLowersAndCompilesOnce) {
  Tensor a = ir::placeholder("A", dims({48, 40})), b = ir::placeholder("B", dims({40, 24}));
  Tensor c = ops::relu(ops::matmul(a, b));
  Delta d;
  CompileResult r = compile({c}, {a, b});
  EXPECT_EQ(d(Counter::kCompileCalls), 1);
  EXPECT_EQ(d(Counter::kStagePlans), 1);
  EXPECT_EQ(d(Counter::kLowerings), 1);
  EXPECT_EQ(d(Counter::kJitCompiles), 1);
  EXPECT_EQ(d(Counter::kTuneRuns), 0);
  EXPECT_EQ(r.report.source, "rules");
  EXPECT_TRUE(r.report.candidates.empty());
  EXPECT_EQ(r.report.schedule.dump(), r.kernel->schedule().dump());
  expect_matches_reference(r, {c}, {a, b});
}

TEST(CompileCall, SmallKernelsAreNeitherTunedNorParallelInTheAutomaticScope) {
  Tensor a = ir::placeholder("A", dims({32, 32})), b = ir::placeholder("B", dims({32, 32}));
  Tensor c = ops::matmul(a, b);
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  req.scope = TuneScope::kAutomatic;
  Delta d;
  CompileResult r = compile({c}, {a, b}, req);
  EXPECT_EQ(d(Counter::kTuneRuns), 0);
  EXPECT_EQ(d(Counter::kJitCompiles), 1);
  EXPECT_EQ(r.report.source, "rules");
  EXPECT_NE(r.report.note.find("too little"), std::string::npos) << r.report.note;
  // 12 KiB at the boundary: below serial_bytes, so the kernel runs on the calling thread when
  // there are threads to spare (with one thread there is nothing to wake).
  if (runtime::get_num_threads() > 1) {
    EXPECT_FALSE(r.report.parallel);
    for (const schedule::StageAnnotation& s : r.kernel->schedule().stages) EXPECT_FALSE(s.parallel);
  }
  CompileRequest forced;
  forced.threads = Threads::kParallel;
  EXPECT_TRUE(compile({c}, {a, b}, forced).report.parallel);
  expect_matches_reference(r, {c}, {a, b});
}

TEST(CompileCall, AskingForTuningTunesEveryKernel) {
  // The same small matmul as above, in the scope a caller asking for tuning gets (the default).
  Tensor a = ir::placeholder("A", dims({32, 32})), b = ir::placeholder("B", dims({32, 32}));
  Tensor c = ops::matmul(a, b);
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  ASSERT_EQ(req.scope, TuneScope::kEvery);
  Delta d;
  CompileResult r = compile({c}, {a, b}, req);
  EXPECT_EQ(d(Counter::kTuneRuns), 1);
  EXPECT_EQ(r.report.note.find("too little"), std::string::npos) << r.report.note;
  EXPECT_FALSE(r.report.candidates.empty());
  expect_matches_reference(r, {c}, {a, b});
}

TEST(CompileCall, TheAutomaticScopeTunesALargeShareOfItsGraph) {
  // A matmul whose summation takes 20 us at this host's FMA peak: under min_tuned_kernel_us,
  // over min_share_kernel_us. Tuned where it is most of its graph's work, not where it is a
  // small part of it; with no graph known, the size rule alone decides.
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  const double flops_per_us = cost::get_peak_info().fp32_gflops_all * 1e3;
  ASSERT_GT(flops_per_us, 0);
  const double target_us = 20;
  ASSERT_LT(target_us, policy.min_tuned_kernel_us);
  ASSERT_GT(target_us, policy.min_share_kernel_us);
  const int64_t k = std::max<int64_t>(1, std::llround(target_us * flops_per_us / 2 / (64 * 64)));
  Tensor a = ir::placeholder("A", dims({64, k})), b = ir::placeholder("B", dims({k, 64}));
  const schedule::StagePlan& plan = tune::Task::create({ops::matmul(a, b)}, {a, b}).plan;
  const double points = schedule::reduce_points(plan, 1);
  EXPECT_TRUE(worth_tuning(plan, TuneScope::kAutomatic, points * 1.5));
  EXPECT_FALSE(worth_tuning(plan, TuneScope::kAutomatic, points * 10));
  EXPECT_FALSE(worth_tuning(plan, TuneScope::kAutomatic, 0));
  EXPECT_TRUE(worth_tuning(plan, TuneScope::kEvery, 0));
}

TEST(CompileCall, AKernelWithMuchWorkOnLittleDataRunsInParallel) {
  // A 128x256x256 matmul (a small transformer's linear layer) moves 0.5 MiB, under
  // serial_bytes, but iterates over 8.4M points: on one thread it takes twice as long.
  Tensor a = ir::placeholder("A", dims({128, 256})), b = ir::placeholder("B", dims({256, 256}));
  Tensor c = ops::matmul(a, b);
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  CompileRequest req;
  req.threads = Threads::kAuto;
  CompileResult r = compile({c}, {a, b}, req);
  const schedule::StagePlan& plan = tune::Task::create({c}, {a, b}).plan;
  ASSERT_LT(schedule::boundary_bytes(plan, 1), policy.serial_bytes);
  ASSERT_GE(schedule::total_points(plan, 1), policy.serial_points);
  EXPECT_TRUE(r.report.parallel);
  expect_matches_reference(r, {c}, {a, b});
}

TEST(CompileCall, TheTunedKernelIsTheOneMeasuredNotARebuild) {
  Tensor a = ir::placeholder("A", dims({256, 256})), b = ir::placeholder("B", dims({256, 256}));
  Tensor c = ops::matmul(a, b);
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  Delta d;
  CompileResult r = compile({c}, {a, b}, req);
  const CompileReport& rep = r.report;
  EXPECT_EQ(d(Counter::kTuneRuns), 1);
  EXPECT_EQ(d(Counter::kStagePlans), 1);
  ASSERT_GE(rep.candidates.size(), 2u);
  int built = 0, chosen = 0, reused = 0;
  for (const CandidateReport& cand : rep.candidates) {
    EXPECT_TRUE(cand.ok) << cand.error;
    built += cand.build_ms > 0;
    reused += cand.build_ms == 0;  // the default schedule: the verification reference itself
    chosen += cand.chosen;
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(reused, 1);
  // One JIT compile per candidate plus the reference, none for the returned kernel.
  EXPECT_EQ(d(Counter::kJitCompiles), built + 1);
  EXPECT_EQ(d(Counter::kLowerings), built + 1);
  EXPECT_EQ(d(Counter::kCandidates), static_cast<double>(rep.candidates.size()));
  EXPECT_GT(rep.default_ms, 0);
  EXPECT_GT(rep.median_ms, 0);
  // The rules' schedule stays unless the winner beat it by the win margin.
  if (rep.source == "rules") {
    EXPECT_EQ(rep.schedule.tuner, "default");
  } else {
    EXPECT_EQ(rep.source, "construct:gensor");
    EXPECT_LT(rep.median_ms, schedule::tuning_policy().win_margin * rep.default_ms);
  }
  expect_matches_reference(r, {c}, {a, b});
}

TEST(CompileCall, ConstructModeTunesALinearWithItsEpilogueThroughUnitDims) {
  // ATen's linear: [M, N] viewed [1, M, N] before the bias and gelu. One stage, whose candidates
  // construct mode models with the epilogue's reads and its [1, M, N] write-back.
  Tensor x = ir::placeholder("X", dims({128, 256})), w = ir::placeholder("W", dims({512, 256}));
  Tensor bias = ir::placeholder("bias", dims({512}));
  Tensor y =
      ops::gelu(ops::add(ops::reshape(ops::dense(x, w, nullptr), dims({1, 128, 512})), bias));
  ASSERT_EQ(tune::Task::create({y}, {x, w, bias}).plan.stages.size(), 1u);
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  CompileResult r = compile({y}, {x, w, bias}, req);
  ASSERT_GE(r.report.candidates.size(), 2u);
  for (const CandidateReport& cand : r.report.candidates) EXPECT_TRUE(cand.ok) << cand.error;
  expect_matches_reference(r, {y}, {x, w, bias});
}

TEST(CompileCall, ASecondCompileTakesTheScheduleFromTheRecords) {
  Tensor a = ir::placeholder("A", dims({128, 256})), b = ir::placeholder("B", dims({256, 256}));
  Tensor c = ops::relu(ops::matmul(a, b));
  db::RecordsDB records = db::RecordsDB::open(":memory:");
  CompileRequest req;
  req.tune = TuneMode::kConstruct;
  req.records = &records;
  CompileResult first = compile({c}, {a, b}, req);
  EXPECT_FALSE(first.report.workload.empty());
  EXPECT_EQ(records.count(), 1);
  // The same workload under other names (another model's identical operator).
  Tensor a2 = ir::placeholder("X", dims({128, 256})), b2 = ir::placeholder("W", dims({256, 256}));
  Tensor c2 = ops::relu(ops::matmul(a2, b2));
  Delta d;
  CompileResult second = compile({c2}, {a2, b2}, req);
  EXPECT_EQ(second.report.source, "records");
  EXPECT_EQ(d(Counter::kTuneRuns), 0);
  EXPECT_EQ(d(Counter::kRecordHits), 1);
  EXPECT_EQ(d(Counter::kJitCompiles), 1);
  EXPECT_EQ(second.report.workload, first.report.workload);
  EXPECT_EQ(records.count(), 1);
  expect_matches_reference(second, {c2}, {a2, b2});
}

TEST(CompileCall, AGivenScheduleIsBuiltAsGivenAndABadOneIsAnError) {
  Tensor a = ir::placeholder("A", dims({40, 50})), b = ir::placeholder("B", dims({50, 60}));
  Tensor c = ops::matmul(a, b);
  schedule::KernelSchedule s = compile({c}, {a, b}).report.schedule;
  s.stages[0].tile_reduce = {5};
  CompileRequest req;
  req.schedule = s;
  CompileResult r = compile({c}, {a, b}, req);
  EXPECT_EQ(r.report.source, "given");
  EXPECT_EQ(r.kernel->schedule().stages[0].tile_reduce, std::vector<int64_t>{5});
  expect_matches_reference(r, {c}, {a, b});
  req.schedule->stages.clear();
  EXPECT_THROW(compile({c}, {a, b}, req), tessera::Error);
}

TEST(CompileCall, TuneModeNamesRoundTrip) {
  for (TuneMode m : {TuneMode::kDefault, TuneMode::kConstruct, TuneMode::kSearch}) {
    EXPECT_EQ(tune_mode_from_name(tune_mode_name(m)), m);
  }
  EXPECT_THROW(tune_mode_from_name("ansor"), tessera::Error);
}

}  // namespace
}  // namespace tessera::compiler
