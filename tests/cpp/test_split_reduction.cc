// Cascade summation (schedule/split_reduction.h): long floating-point sums become trees of chunk
// sums, with the same values as the sum written out, and stay accurate at any length.
#include <gtest/gtest.h>

#include "e2e_harness.h"
#include "ir/simplify.h"
#include "ops/elementwise.h"
#include "ops/reduction.h"
#include "schedule/split_reduction.h"

namespace tessera::testing {
namespace {

using ir::Tensor;

std::vector<ir::Expr> dims(std::initializer_list<int64_t> d) {
  std::vector<ir::Expr> out;
  for (int64_t v : d) out.push_back(ir::int_imm(v));
  return out;
}

// Largest count of values any sum of the DAG combines into one output point.
int64_t longest_sum(const std::vector<Tensor>& outputs) {
  int64_t longest = 0;
  for (const Tensor& t : ir::collect_dag(outputs).computes) {
    if (t->op->reduce != ir::ReduceKind::kSum) continue;
    int64_t n = 1;
    for (const ir::IterVar& r : t->op->reduce_axes) n *= ir::const_int_bound(r.extent).hi;
    longest = std::max(longest, n);
  }
  return longest;
}

// Runs the outputs through the JIT (default schedules) and returns them.
std::vector<runtime::NDArray> run_jit(const std::vector<Tensor>& outputs,
                                      const std::vector<Tensor>& inputs,
                                      std::vector<runtime::NDArray>& in_arrays,
                                      const std::map<const ir::ExprNode*, int64_t>& sizes = {}) {
  compiler::BuiltKernel k = compiler::build_cpu(outputs, inputs);
  std::vector<runtime::NDArray> got;
  std::vector<void*> ptrs;
  for (auto& a : in_arrays) ptrs.push_back(a.data());
  for (const Tensor& o : outputs) {
    got.emplace_back(o->dtype, concrete_shape(o, sizes));
    got.back().fill(12345.0);
  }
  for (auto& a : got) ptrs.push_back(a.data());
  std::vector<int64_t> size_values;
  for (const ir::Var& v : k.func().size_vars) size_values.push_back(sizes.at(v.get()));
  k.run(ptrs, size_values);
  return got;
}

TEST(SplitReduction, ShortSumsMaxAndIntegerSumsAreLeftAlone) {
  Tensor x = ir::placeholder("x", dims({4, 8192}));
  Tensor s = ops::reduce_sum(x, {1});
  EXPECT_EQ(schedule::split_long_sums({s})[0].get(), s.get());
  Tensor y = ir::placeholder("y", dims({100000}));
  Tensor mx = ops::reduce_max(y, {0});
  EXPECT_EQ(schedule::split_long_sums({mx})[0].get(), mx.get());
  Tensor yi = ir::placeholder("yi", dims({100000}), ir::DType::kInt32);
  Tensor si = ops::reduce_sum(yi, {0});
  EXPECT_EQ(schedule::split_long_sums({si})[0].get(), si.get());
}

TEST(SplitReduction, EverySumCountsAtMostTheChunkAndOutputsKeepTheirIdentity) {
  Tensor x = ir::placeholder("x", dims({3, 5000, 7}));
  Tensor s = ops::reduce_sum(x, {1, 2});
  Tensor r = ops::relu(s);  // a consumer of the long sum is rebuilt to read the new one
  const std::vector<Tensor> out = schedule::split_long_sums({s, r}, 64);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_LE(longest_sum(out), 64);
  EXPECT_GT(longest_sum({s}), 64);
  for (size_t i = 0; i < 2; ++i) {
    const Tensor& before = i == 0 ? s : r;
    EXPECT_EQ(out[i]->name, before->name);
    EXPECT_EQ(out[i]->dtype, before->dtype);
    ASSERT_EQ(out[i]->ndim(), before->ndim());
    EXPECT_TRUE(out[i]->shape[0]->is_const_int(3));
  }
  // The rewritten relu reads the rewritten sum, not the original.
  for (const Tensor& t : ir::collect_dag({out[1]}).computes) EXPECT_NE(t.get(), s.get());
}

TEST(SplitReduction, SplitSumsEqualTheSumWrittenOut) {
  // Chunks of 16 force several levels and a tail at each: the reference interpreter (double
  // precision) must give the same values for the original and the tree.
  Tensor x = ir::placeholder("x", dims({3, 61, 7}));
  Tensor y = ir::placeholder("y", dims({1001}));
  std::vector<Tensor> sums = {ops::reduce_sum(x, {1, 2}), ops::reduce_sum(x, {0, 1}),
                              ops::reduce_sum(x, {}), ops::reduce_mean(y, {0}),
                              ops::reduce_sum(ops::mul(y, y), {0}, true)};
  auto xv = runtime::NDArray::random(ir::DType::kFloat32, {3, 61, 7}, 5);
  auto yv = runtime::NDArray::random(ir::DType::kFloat32, {1001}, 6);
  std::map<const ir::TensorNode*, runtime::NDArray> in = {{x.get(), xv}, {y.get(), yv}};
  const std::vector<Tensor> split = schedule::split_long_sums(sums, 16);
  EXPECT_LE(longest_sum(split), 16);
  auto want = ops::run_reference(sums, in);
  auto got = ops::run_reference(split, in);
  std::vector<runtime::NDArray> arrays = {xv, yv};
  auto jit = run_jit(split, {x, y}, arrays);
  for (size_t i = 0; i < sums.size(); ++i) {
    auto r = runtime::allclose(got[i], want[i], 1e-6, 1e-6);
    EXPECT_TRUE(r.ok) << sums[i]->name << ": " << r.message;
    auto j = runtime::allclose(jit[i], want[i], 1e-5, 1e-5);
    EXPECT_TRUE(j.ok) << sums[i]->name << " (JIT): " << j.message;
  }
}

TEST(SplitReduction, SymbolicExtentsSplitAtRunTimeSizes) {
  ir::Var n = ir::size_var("N", 0, 100000);
  Tensor x = ir::placeholder("x", {n});
  Tensor s = ops::reduce_sum(x, {0});
  EXPECT_LE(longest_sum(schedule::split_long_sums({s})), schedule::kSumChunk);
  for (int64_t nv : {0, 1, 8191, 8192, 8193, 99999}) {
    check_graph({{s}, {x}, {{n.get(), nv}}}, std::nullopt, true, {1e-5, 1e-4});
  }
}

TEST(SplitReduction, SumsThatAreEmptyAtRunTimeWriteTheirIdentity) {
  // The column sum over K rows splits into blocks and a tail; at K = 3 the blocks are empty and
  // at K = 8192 the tail is. A tiled reduction over no values must still write 0 (it used to
  // leave its output unwritten: NaN or garbage downstream).
  ir::Var k = ir::size_var("K", 2, 65536);
  Tensor x = ir::placeholder("x", {k, ir::int_imm(32)});
  Tensor s = ops::reduce_sum(x, {0});
  for (int64_t kv : {3, 8192, 8195, 20000}) {
    check_graph({{s}, {x}, {{k.get(), kv}}}, std::nullopt, true, {1e-5, 1e-4});
  }
}

TEST(SplitReduction, AFullSumOfTwoToThe25TwosIsExact) {
  // One accumulator stops at 2^25 (its ulp reaches 4 and every + 2 rounds back), the answer
  // eager gives is 2^26; so does every chunked order, exactly.
  const int64_t n = int64_t{1} << 25;
  Tensor x = ir::placeholder("x", dims({n}));
  Tensor s = ops::reduce_sum(ops::mul(x, 2.0), {});
  runtime::NDArray xv(ir::DType::kFloat32, {n});
  xv.fill(1.0);
  std::vector<runtime::NDArray> arrays = {xv};
  auto got = run_jit({s}, {x}, arrays);
  EXPECT_EQ(got[0].f32()[0], 67108864.0f);
  Tensor m = ops::reduce_mean(x, {0});
  EXPECT_EQ(run_jit({m}, {x}, arrays)[0].f32()[0], 1.0f);
}

// 1 + 2^-11: added to a float32 sum past 8192, its last bit is at most half an ulp and is lost.
// A sum of them is exact while every accumulator stays below 8192 (kSumChunk values), and loses
// about 2^-11 per value beyond that where one accumulator runs over the whole row.
constexpr double kFragile = 1.0 + 1.0 / 2048;

TEST(SplitReduction, LongRowsOverManyOutputsStayOneStageAndChunkInPlace) {
  // Softmax over a vocabulary: the row sums keep their stage (and their row fusion); the
  // cross-lane lowering restarts its accumulators every kSumChunk values instead.
  const int64_t rows = 16, cols = 1000003;
  Tensor x = ir::placeholder("x", dims({rows, cols}));
  Tensor s = ops::reduce_sum(x, {1});
  EXPECT_EQ(schedule::split_long_sums({s})[0].get(), s.get());
  EXPECT_EQ(schedule::plan_stages({s}, {x}).stages.size(), 1u);
  runtime::NDArray xv(ir::DType::kFloat32, {rows, cols});
  xv.fill(kFragile);
  std::vector<runtime::NDArray> arrays = {xv};
  auto got = run_jit({s}, {x}, arrays);
  const double want = cols * kFragile;
  for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(got[0].f32()[r], want, want * 1e-6) << r;
}

TEST(SplitReduction, AMultiLevelTiledLongSumRestartsItsAccumulators) {
  // Whatever inner reduce tile a schedule asks for, a long float sum's accumulators combine at
  // most kSumChunk values before their partial goes to the output.
  const int64_t rows = 16, cols = 100003;
  Tensor x = ir::placeholder("x", dims({rows, cols}));
  Tensor s = ops::reduce_sum(x, {1});
  schedule::StageAnnotation a;
  a.tile_outer = {1};
  a.tile_reg = {1};
  a.tile_reduce = {cols};  // one scalar accumulator over the whole row, as asked
  schedule::KernelSchedule ks;
  ks.stages = {a};
  runtime::NDArray xv(ir::DType::kFloat32, {rows, cols});
  xv.fill(kFragile);
  compiler::BuildOptions opts;
  opts.schedule = ks;
  compiler::BuiltKernel k = compiler::build_cpu({s}, {x}, opts);
  runtime::NDArray out(ir::DType::kFloat32, {rows});
  k.run({xv.data(), out.data()}, {});
  const double want = cols * kFragile;
  for (int64_t r = 0; r < rows; ++r) EXPECT_NEAR(out.f32()[r], want, want * 1e-6) << r;
}

TEST(SplitReduction, AColumnSumOverALongAxisStaysAccurate) {
  // A sum along a non-contiguous axis keeps one accumulator per column and chunk: its error is
  // that of a sum of kSumChunk values, however long the column.
  const int64_t rows = 300007;
  Tensor x = ir::placeholder("x", dims({rows, 8}));
  Tensor s = ops::reduce_sum(x, {0});
  auto xv = runtime::NDArray::random(ir::DType::kFloat32, {rows, 8}, 3);
  for (int64_t i = 0; i < rows * 8; ++i) xv.f32()[i] += 1.0f;  // no cancellation: all > 0
  std::vector<runtime::NDArray> arrays = {xv};
  auto got = run_jit({s}, {x}, arrays);
  for (int j = 0; j < 8; ++j) {
    double want = 0;
    for (int64_t i = 0; i < rows; ++i) want += xv.f32()[i * 8 + j];
    EXPECT_NEAR(got[0].f32()[j], want, want * 2e-6) << "column " << j;
  }
}

}  // namespace
}  // namespace tessera::testing
