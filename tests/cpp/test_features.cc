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
  ProgramFeatures pf = extract_features(axpy_like(), /*work=*/1);
  ASSERT_EQ(pf.num_rows, 1);
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
    ProgramFeatures pf = extract_features(f, task.iteration_points());
    EXPECT_EQ(pf.num_rows, count_stores(f.body));
    EXPECT_EQ(pf.values.size(), static_cast<size_t>(pf.num_rows) * kNumFeatures);
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
    ProgramFeatures pf = extract_features(f, task.iteration_points());
    EXPECT_EQ(pf.num_rows, count_stores(f.body));
    EXPECT_GT(pf.num_rows, 0);
    for (float v : pf.values) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Features, RepeatableAndDifferentForDifferentSchedules) {
  tune::Task task = matmul_task();
  schedule::KernelSchedule def = task.default_schedule();
  ProgramFeatures f1 =
      extract_features(schedule::lower(task.plan, def, "k"), task.iteration_points());
  ProgramFeatures f2 =
      extract_features(schedule::lower(task.plan, def, "k"), task.iteration_points());
  EXPECT_EQ(f1.values, f2.values);
  // The register-blocked accumulator store reads and writes a register buffer.
  bool register_rw = false;
  for (int i = 0; i < f1.num_rows; ++i) {
    register_rw = register_rw || (f1.row(i)[kFeatureScope + 3] == 1);
  }
  EXPECT_TRUE(register_rw);
  schedule::KernelSchedule other = def;
  other.stages[0].parallel = !other.stages[0].parallel;
  other.stages[0].reduce_unroll = other.stages[0].reduce_unroll == 1 ? 2 : 1;
  ProgramFeatures f3 =
      extract_features(schedule::lower(task.plan, other, "k"), task.iteration_points());
  EXPECT_NE(f1.values, f3.values);
}

// for b in [0, batch): for i in [0, 8): for j in [0, 16) vectorized:
//   C[b*128 + i*16 + j] = A[b*128 + i*16 + j] * B[b*16 + j] + 1
// Every buffer grows with the batch, and the tile below the batch loop stays the same.
loop::LoweredFunc batched(int64_t batch) {
  ir::Buffer a = ir::make_buffer("A", ir::DType::kFloat32, dims({batch, 8, 16}));
  ir::Buffer b = ir::make_buffer("B", ir::DType::kFloat32, dims({batch, 16}));
  ir::Buffer c = ir::make_buffer("C", ir::DType::kFloat32, dims({batch, 8, 16}));
  ir::Var n = ir::var("b", 0, batch - 1), i = ir::var("i", 0, 7), j = ir::var("j", 0, 15);
  Expr idx = n * ir::int_imm(128) + i * ir::int_imm(16) + j;
  Expr value = ir::load(a, idx) * ir::load(b, n * ir::int_imm(16) + j) + ir::float_imm(1.0);
  loop::Stmt body = loop::make_store(c, idx, value);
  body = loop::make_for(j, ir::int_imm(0), ir::int_imm(16), ForKind::kVectorized, body);
  body = loop::make_for(i, ir::int_imm(0), ir::int_imm(8), ForKind::kSerial, body);
  body = loop::make_for(n, ir::int_imm(0), ir::int_imm(batch), ForKind::kSerial, body);
  loop::LoweredFunc f;
  f.name = "batched";
  f.args = {a, b, c};
  f.body = body;
  return f;
}

TEST(Features, WorkNormalisedRowsDoNotSeeTheBatch) {
  // Totals are divided by the task's work: a nest that repeats the same tile over a larger batch,
  // with the work scaled alike, has the same row. Without the normalisation the op counts, bytes,
  // lines and executions all grow with the batch.
  const ProgramFeatures small = extract_features(batched(4), 4 * 128);
  const ProgramFeatures large = extract_features(batched(64), 64 * 128);
  ASSERT_EQ(small.num_rows, 1);
  ASSERT_EQ(large.num_rows, 1);
  for (int k = 0; k < kNumFeatures; ++k) {
    EXPECT_FLOAT_EQ(small.row(0)[k], large.row(0)[k]) << feature_names()[k];
  }
  // One float add and one mul per point of work; one execution per point.
  EXPECT_FLOAT_EQ(small.row(0)[kFeatureArith + 0], lg(1));
  EXPECT_FLOAT_EQ(small.row(0)[kFeatureMisc + 0], lg(1));
  // The absolute work still scales those the normalisation covers: the same nest over twice the
  // work has half the executions per point.
  const ProgramFeatures halved = extract_features(batched(4), 8 * 128);
  EXPECT_FLOAT_EQ(halved.row(0)[kFeatureMisc + 0], lg(0.5));
  EXPECT_FLOAT_EQ(halved.row(0)[kFeatureBuffers + 3], lg(4 * 128 * 4 / (8.0 * 128)));
}

TEST(Features, BatchOfALoweredBatchMatmulLeavesTheNormalisedFeaturesAlone) {
  // The same schedule on two batch sizes of one batched matmul: the batch loop is outermost and
  // parallel, so only the parallel extent may tell them apart; the op counts, bytes, lines and
  // executions per point of work do not.
  auto task_of = [](int64_t batch) {
    ir::Tensor a = ir::placeholder("A", dims({batch, 32, 24}));
    ir::Tensor b = ir::placeholder("B", dims({batch, 24, 40}));
    return tune::Task::create({ops::batch_matmul(a, b)}, {a, b}, "bmm");
  };
  const tune::Task small = task_of(2), large = task_of(16);
  const schedule::KernelSchedule s = small.default_schedule();
  const ProgramFeatures fs =
      extract_features(schedule::lower(small.plan, s, "k"), small.iteration_points());
  const ProgramFeatures fl =
      extract_features(schedule::lower(large.plan, s, "k"), large.iteration_points());
  ASSERT_EQ(fs.num_rows, fl.num_rows);
  std::vector<int> normalised;
  for (int k = 0; k < 10; ++k) normalised.push_back(kFeatureArith + k);
  for (int b = 0; b < kMaxBuffers; ++b) {
    for (int k : {3, 5, 13, 15}) normalised.push_back(kFeatureBuffers + b * kBufferFeatures + k);
  }
  normalised.push_back(kFeatureAlloc + 1);
  normalised.push_back(kFeatureAlloc + 3);
  normalised.push_back(kFeatureMisc + 0);
  for (int r = 0; r < fs.num_rows; ++r) {
    for (int k : normalised) {
      EXPECT_NEAR(fs.row(r)[k], fl.row(r)[k], 1e-4) << "store " << r << " " << feature_names()[k];
    }
  }
}

}  // namespace
}  // namespace tessera::cost
