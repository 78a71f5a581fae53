// Dynamic workloads (DietCode, item a): instances and widened copies of a symbolic DAG, sample
// points, and the central promise: a schedule tuned on one representative instance, compiled
// ONCE over the symbolic sizes, runs every size of the range correctly (checked against the
// reference interpreter), including sizes that are not multiples of its tiles.
#include <gtest/gtest.h>

#include <set>

#include "compiler/build.h"
#include "const_dims.h"
#include "dynamic_check.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "synthetic_hw.h"
#include "tune/dynamic/workload.h"
#include "tune/gensor/construct.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::tune::dynamic {
namespace {

using ir::Tensor;
using testing::dims;

using Dense = testing::DynamicDense;

void expect_matches_reference(const compiler::BuiltKernel& k, const DynamicWorkload& w,
                              const SizePoint& sizes) {
  testing::expect_runs_like_reference(
      w, sizes, [&](const std::vector<void*>& b, const SizePoint& s) { k.run(b, s); });
}

TEST(DynamicWorkload, RangesComeFromTheSizeVariables) {
  Dense d(4, 1, 40);
  DynamicWorkload w = d.workload();
  ASSERT_EQ(w.num_axes(), 1u);
  EXPECT_TRUE(w.size_vars()[0].same_as(d.t));
  EXPECT_EQ(w.ranges()[0].lo, 1);
  EXPECT_EQ(w.ranges()[0].hi, 40);
  EXPECT_EQ(w.largest(), SizePoint{40});
  EXPECT_TRUE(w.in_range({1}));
  EXPECT_FALSE(w.in_range({0}));
  EXPECT_FALSE(w.in_range({41}));
  EXPECT_FALSE(w.in_range({3, 4}));
  // An unbounded size variable has no range to tune over.
  ir::Var n = ir::size_var("N");
  Tensor x = ir::placeholder("x", {n});
  EXPECT_THROW(DynamicWorkload::create({ops::relu(x)}, {x}), Error);
}

TEST(DynamicWorkload, InstanceComputesWhatTheSymbolicDagComputesAtThoseSizes) {
  Dense d(4, 1, 40);
  DynamicWorkload w = d.workload();
  const DagCopy inst = w.instantiate({5});
  ASSERT_EQ(inst.inputs.size(), 2u);
  ASSERT_EQ(inst.outputs.size(), 1u);
  EXPECT_TRUE(ir::collect_dag(inst.outputs).size_vars.empty());
  ASSERT_TRUE(inst.inputs[0]->shape[0]->is_const_int(20));
  EXPECT_EQ(inst.outputs[0]->name, d.y->name);
  EXPECT_EQ(inst.outputs[0]->op->tag, d.y->op->tag);
  // Same values as the symbolic DAG's reference at T = 5.
  runtime::NDArray x = runtime::NDArray::random(ir::DType::kFloat32, {20, 24}, 1);
  runtime::NDArray wt = runtime::NDArray::random(ir::DType::kFloat32, {40, 24}, 2);
  auto sym = ops::run_reference({d.y}, {{d.x.get(), x}, {d.w.get(), wt}}, w.size_map({5}));
  auto con =
      ops::run_reference(inst.outputs, {{inst.inputs[0].get(), x}, {inst.inputs[1].get(), wt}});
  EXPECT_TRUE(runtime::allclose(con[0], sym[0], 0, 0).ok);
}

TEST(DynamicWorkload, WidenedCopyHasUnboundedSizesInTheSameOrder) {
  ir::Var m = ir::size_var("M", 1, 64), n = ir::size_var("N", 2, 30);
  Tensor a = ir::placeholder("A", {m, ir::int_imm(8)}),
         b = ir::placeholder("B", {ir::int_imm(8), n});
  Tensor c = ops::matmul(a, b);
  DynamicWorkload w = DynamicWorkload::create({c}, {a, b});
  const DagCopy wide = w.widened();
  const std::vector<ir::Var> vars = ir::collect_dag(wide.outputs).size_vars;
  ASSERT_EQ(vars.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(vars[i]->name, w.size_vars()[i]->name);
    EXPECT_FALSE(vars[i].same_as(w.size_vars()[i]));
    EXPECT_EQ(vars[i]->lo, 0);
    EXPECT_EQ(vars[i]->hi, ir::kNoUpperBound);
  }
  // The copy's iterators follow the new extents (no bound left from the old range).
  EXPECT_EQ(wide.outputs[0]->op->axes[0].var->hi, ir::kNoUpperBound);
}

TEST(DynamicWorkload, SamplePointsCoverTheBoxAndItsEnds) {
  Dense d(4, 3, 12);
  EXPECT_EQ(sample_points(d.workload(), 100).size(), 10u);  // every size
  ir::Var m = ir::size_var("M", 1, 100), n = ir::size_var("N", 5, 9);
  Tensor a = ir::placeholder("A", {m, n});
  DynamicWorkload w = DynamicWorkload::create({ops::relu(a)}, {a});
  const std::vector<SizePoint> pts = sample_points(w, 25);
  EXPECT_LE(pts.size(), 25u);
  std::set<int64_t> ms, ns;
  for (const SizePoint& p : pts) {
    EXPECT_TRUE(w.in_range(p));
    ms.insert(p[0]);
    ns.insert(p[1]);
  }
  EXPECT_TRUE(ms.count(1) && ms.count(100));
  EXPECT_TRUE(ns.count(5) && ns.count(9));
  EXPECT_EQ(std::set<SizePoint>(pts.begin(), pts.end()).size(), pts.size());  // no duplicates
}

// A schedule construct mode tuned on one representative instance, as DietCode's micro-kernel.
schedule::KernelSchedule tuned_on(const DynamicWorkload& w, const SizePoint& rep) {
  const DagCopy inst = w.instantiate(rep);
  gensor::ConstructOptions o;
  o.predict_only = true;
  o.top_k = 1;
  o.chains = 4;
  o.hardware = testing::synthetic_hw();
  return gensor::construct(Task::create(inst.outputs, inst.inputs, "inst"), o).schedule;
}

TEST(DynamicWorkload, OneKernelCompiledOnceRunsEverySizeOfTheRange) {
  Dense d(4, 1, 40);
  DynamicWorkload w = d.workload();
  compiler::BuildOptions opts;
  opts.schedule = tuned_on(w, {16});
  const compiler::BuiltKernel k = compiler::build_cpu(w.outputs(), w.inputs(), opts);
  const int64_t tile_rows = opts.schedule->stages[0].tile_outer[0];
  const int64_t jits = util::read(util::Counter::kJitCompiles);
  bool saw_unaligned = false;
  for (int64_t t = 1; t <= 40; ++t) {
    saw_unaligned |= (4 * t) % tile_rows != 0;
    expect_matches_reference(k, w, {t});
  }
  EXPECT_TRUE(saw_unaligned || tile_rows == 1) << "tile " << tile_rows;
  EXPECT_EQ(util::read(util::Counter::kJitCompiles), jits) << "a size compiled a kernel";
}

TEST(DynamicWorkload, OneKernelOverTwoSymbolicAxes) {
  ir::Var m = ir::size_var("M", 1, 48), n = ir::size_var("N", 1, 70);
  Tensor a = ir::placeholder("A", {m, ir::int_imm(32)}),
         b = ir::placeholder("B", {ir::int_imm(32), n});
  Tensor c = ops::relu(ops::matmul(a, b));
  DynamicWorkload w = DynamicWorkload::create({c}, {a, b}, "mm");
  compiler::BuildOptions opts;
  opts.schedule = tuned_on(w, {48, 64});
  const compiler::BuiltKernel k = compiler::build_cpu(w.outputs(), w.inputs(), opts);
  for (const SizePoint& p : sample_points(w, 30)) expect_matches_reference(k, w, p);
  for (const SizePoint& p : std::vector<SizePoint>{{1, 1}, {17, 33}, {47, 69}, {48, 70}}) {
    expect_matches_reference(k, w, p);
  }
}

}  // namespace
}  // namespace tessera::tune::dynamic
