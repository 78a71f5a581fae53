// Per-store features of lowered loop IR: exact values on a hand-built loop nest, one row per
// store of a lowered kernel, repeatable, and different for different schedules.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "const_dims.h"
#include "cost/features.h"
#include "ops/ops.h"
#include "schedule/lower.h"
#include "tune/common.h"
#include "tune/search/space.h"

namespace tessera::cost {
namespace {

using ir::Expr;
using loop::ForKind;
using testing::dims;

float lg(double x) { return std::log2(1.0f + static_cast<float>(x)); }

int count_stores(const loop::Stmt& s) {
  if (!s) return 0;
  int n = s->kind == loop::StmtKind::kStore ? 1 : 0;
  n += count_stores(s->body) + count_stores(s->then_case) + count_stores(s->else_case);
  for (const loop::Stmt& c : s->seq) n += count_stores(c);
  return n;
}

// for i in [0, 64) parallel: for j in [0, 16) vectorized: C[i*16 + j] = A[i*16 + j] * B[j] + 1
loop::LoweredFunc axpy_like() {
  ir::Buffer a = ir::make_buffer("A", ir::DType::kFloat32, dims({64, 16}));
  ir::Buffer b = ir::make_buffer("B", ir::DType::kFloat32, dims({16}));
  ir::Buffer c = ir::make_buffer("C", ir::DType::kFloat32, dims({64, 16}));
  ir::Var i = ir::var("i", 0, 63), j = ir::var("j", 0, 15);
  Expr idx = i * ir::int_imm(16) + j;
  Expr value = ir::load(a, idx) * ir::load(b, j) + ir::float_imm(1.0);
  loop::Stmt body = loop::make_store(c, idx, value);
  body = loop::make_for(j, ir::int_imm(0), ir::int_imm(16), ForKind::kVectorized, body);
  body = loop::make_for(i, ir::int_imm(0), ir::int_imm(64), ForKind::kParallel, body);
  // A prefetch hint: no store, no row.
  body = loop::make_seq({loop::make_prefetch(a, ir::int_imm(0), 1), body});
  loop::LoweredFunc f;
  f.name = "axpy";
  f.args = {a, b, c};
  f.body = body;
  return f;
}

// Offset of the features of the `which`-th buffer (buffers are sorted by bytes).
int buffer_offset(int which) { return kFeatureBuffers + which * kBufferFeatures; }

TEST(Features, TableHasOneNamePerFeature) {
  EXPECT_EQ(static_cast<int>(feature_names().size()), kNumFeatures);
  EXPECT_EQ(feature_names()[kFeatureBuffers], "buf0_read");
  EXPECT_EQ(feature_names()[kFeatureIntensity], "intensity_0");
  EXPECT_EQ(feature_names()[kFeatureMisc], "outer_prod");
}

TEST(Features, HandBuiltNestHasTheExpectedValues) {
  ProgramFeatures pf = extract_features(axpy_like());
  ASSERT_EQ(pf.num_stores, 1);
  ASSERT_EQ(pf.values.size(), static_cast<size_t>(kNumFeatures));
  const float* r = pf.row(0);
  const double n = 64 * 16;
  EXPECT_FLOAT_EQ(r[kFeatureArith + 0], lg(n));  // one float add per execution
  EXPECT_FLOAT_EQ(r[kFeatureArith + 1], lg(n));  // one float mul
  EXPECT_FLOAT_EQ(r[kFeatureArith + 2], 0);
  EXPECT_FLOAT_EQ(r[kFeatureArith + 6], lg(4 * n));  // i*16 + j in the load of A and the store
  // Vectorized group: one loop of 16, innermost. Parallel: one loop of 64, outermost.
  const float* vec = r + kFeatureLoops;
  EXPECT_FLOAT_EQ(vec[0], lg(1));
  EXPECT_FLOAT_EQ(vec[1], lg(16));
  EXPECT_FLOAT_EQ(vec[2], lg(16));
  EXPECT_FLOAT_EQ(vec[3 + 1], 1);  // innermost
  const float* unroll = r + kFeatureLoops + kLoopGroupSize;
  EXPECT_FLOAT_EQ(unroll[0], 0);
  EXPECT_FLOAT_EQ(unroll[3], 1);  // none
  const float* par = r + kFeatureLoops + 2 * kLoopGroupSize;
  EXPECT_FLOAT_EQ(par[2], lg(64));
  EXPECT_FLOAT_EQ(par[3 + 3], 1);  // outermost
  // Buffers by total bytes, 4 KiB each, so in the order they are seen: the loads A and B (16
  // floats reused by every i), then the store's C.
  const float* a = r + buffer_offset(0);
  const float* b = r + buffer_offset(1);
  const float* c = r + buffer_offset(2);
  EXPECT_FLOAT_EQ(a[0], 1);  // read
  EXPECT_FLOAT_EQ(c[1], 1);  // write
  EXPECT_FLOAT_EQ(a[3], lg(n * 4));
  EXPECT_FLOAT_EQ(a[4], lg(n * 4));   // every element once
  EXPECT_FLOAT_EQ(a[5], lg(n / 16));  // unit stride: 16 floats per line
  EXPECT_FLOAT_EQ(a[9], 1);           // no reuse
  EXPECT_FLOAT_EQ(a[17], lg(1));      // stride 1
  EXPECT_FLOAT_EQ(b[3], lg(n * 4));
  EXPECT_FLOAT_EQ(b[4], lg(16 * 4));  // unique: 64 bytes
  EXPECT_FLOAT_EQ(b[7], 1);           // loop reuse
  EXPECT_FLOAT_EQ(b[12], lg(64));     // reused by each of the 64 i
  EXPECT_FLOAT_EQ(b[10], lg(16));     // 16 executions apart
  EXPECT_FLOAT_EQ(r[kFeatureBuffers + 3 * kBufferFeatures], 0) << "only three buffers";
  EXPECT_FLOAT_EQ(r[kFeatureScope + 0], 1);  // global
  EXPECT_FLOAT_EQ(r[kFeatureMisc + 0], lg(n));
  EXPECT_FLOAT_EQ(r[kFeatureMisc + 1], lg(2));
  EXPECT_FLOAT_EQ(r[kFeatureAlloc], 0);
  // Intensity of the whole nest: 2 flops x 1024 over 4096 + 64 + 4096 unique bytes.
  EXPECT_FLOAT_EQ(r[kFeatureIntensity + kIntensitySamples - 1], lg(2 * n / (4096 + 64 + 4096)));
}

tune::Task matmul_task() {
  ir::Tensor a = ir::placeholder("A", dims({32, 24})), b = ir::placeholder("B", dims({24, 40}));
  return tune::Task::create({ops::matmul(a, b)}, {a, b}, "mm");
}

TEST(Features, OneRowPerStoreOfALoweredKernel) {
  tune::Task task = matmul_task();
  tune::search::SearchSpace space(task);
  std::mt19937_64 rng(4);
  for (int i = 0; i < 10; ++i) {
    schedule::KernelSchedule s = space.sample(rng);
    loop::LoweredFunc f = schedule::lower(task.plan, s, "k");
    ProgramFeatures pf = extract_features(f);
    EXPECT_EQ(pf.num_stores, count_stores(f.body));
    EXPECT_EQ(pf.values.size(), static_cast<size_t>(pf.num_stores) * kNumFeatures);
    for (float x : pf.values) {
      EXPECT_TRUE(std::isfinite(x));
      EXPECT_GE(x, 0);
    }
  }
}

TEST(Features, EveryOpKindsDefaultKernelHasFiniteRows) {
  // Reductions, epilogues, padding stages, pooling and cross-lane rows: the walk handles every
  // statement the lowering emits.
  ir::Tensor x = ir::placeholder("X", dims({1, 4, 10, 10}));
  ir::Tensor w = ir::placeholder("W", dims({8, 4, 3, 3}));
  ir::Tensor bias = ir::placeholder("bias", dims({8}));
  ir::Tensor s = ir::placeholder("S", dims({5, 70}));
  const std::vector<std::pair<std::vector<ir::Tensor>, std::vector<ir::Tensor>>> graphs = {
      {{ops::relu(ops::conv2d(x, w, bias, {1, 1}, {1, 1}))}, {x, w, bias}},
      {{ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})}, {x}},
      {{ops::softmax(s)}, {s}},
  };
  for (const auto& [outs, ins] : graphs) {
    tune::Task task = tune::Task::create(outs, ins, "t");
    loop::LoweredFunc f = schedule::lower(task.plan, task.default_schedule(), "k");
    ProgramFeatures pf = extract_features(f);
    EXPECT_EQ(pf.num_stores, count_stores(f.body));
    EXPECT_GT(pf.num_stores, 0);
    for (float v : pf.values) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Features, RepeatableAndDifferentForDifferentSchedules) {
  tune::Task task = matmul_task();
  schedule::KernelSchedule def = task.default_schedule();
  ProgramFeatures f1 = extract_features(schedule::lower(task.plan, def, "k"));
  ProgramFeatures f2 = extract_features(schedule::lower(task.plan, def, "k"));
  EXPECT_EQ(f1.values, f2.values);
  // The register-blocked accumulator store reads and writes a register buffer.
  bool register_rw = false;
  for (int i = 0; i < f1.num_stores; ++i) {
    register_rw = register_rw || (f1.row(i)[kFeatureScope + 3] == 1);
  }
  EXPECT_TRUE(register_rw);
  schedule::KernelSchedule other = def;
  other.stages[0].parallel = !other.stages[0].parallel;
  other.stages[0].reduce_unroll = other.stages[0].reduce_unroll == 1 ? 2 : 1;
  ProgramFeatures f3 = extract_features(schedule::lower(task.plan, other, "k"));
  EXPECT_NE(f1.values, f3.values);
}

}  // namespace
}  // namespace tessera::cost
