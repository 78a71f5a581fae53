// The reference interpreter itself (memoisation, symbolic sizes, error reporting) and the
// NDArray host array it works on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

#include "naive_ops.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "ops/shape.h"

namespace tessera {
namespace {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::Var;
using optest::all_close;
using optest::dims;
using optest::rand;
using runtime::NDArray;

// ---- NDArray --------------------------------------------------------------------------------

TEST(OpsNDArray, AlignedZeroedAndDeepCopied) {
  NDArray a(DType::kFloat32, {3, 5});
  EXPECT_EQ(a.numel(), 15);
  EXPECT_EQ(a.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % runtime::kNDArrayAlignment, 0u);
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.get(i), 0.0);
  a.set(7, 2.5);
  NDArray b = a;
  b.set(7, -1.0);
  EXPECT_EQ(a.get(7), 2.5);
  EXPECT_EQ(b.get(7), -1.0);
  EXPECT_EQ(a.at({1, 2}), 2.5);
  EXPECT_EQ(a.describe(), "float32[3, 5]");
  EXPECT_EQ(NDArray(DType::kFloat64, {}).numel(), 1);
  EXPECT_TRUE(optest::throws_with([&] { a.f64(); }, "requested float64"));
  EXPECT_TRUE(optest::throws_with([&] { a.at({3, 0}); }, "out of range"));
}

TEST(OpsNDArray, RandomIsSeededAndInRange) {
  NDArray a = NDArray::random(DType::kFloat32, {100}, 42, -2.0, 3.0);
  NDArray b = NDArray::random(DType::kFloat32, {100}, 42, -2.0, 3.0);
  NDArray c = NDArray::random(DType::kFloat32, {100}, 43, -2.0, 3.0);
  bool differs = false;
  double lo = 1e9, hi = -1e9;
  for (int64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(a.get(i), b.get(i));
    differs |= a.get(i) != c.get(i);
    lo = std::min(lo, a.get(i));
    hi = std::max(hi, a.get(i));
  }
  EXPECT_TRUE(differs);
  EXPECT_GE(lo, -2.0);
  EXPECT_LE(hi, 3.0);
  EXPECT_LT(lo, -1.5);  // spread over the range, not stuck near one value
  EXPECT_GT(hi, 2.5);
  NDArray ints = NDArray::random(DType::kInt32, {200}, 1, -3, 3);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < 200; ++i) seen.insert(ints.get_int(i));
  EXPECT_EQ(seen, (std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3}));
}

TEST(OpsNDArray, HalfAndBFloat16Conversions) {
  using runtime::float_to_bfloat16_bits;
  using runtime::float_to_half_bits;
  using runtime::half_bits_to_float;
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);                      // largest half
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);                      // rounds up to inf
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);         // tie to even: 0
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp: tie to even 2
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(NAN))));
  for (uint32_t h = 0; h < 0x7c00; h += 7) {  // finite halves round-trip exactly
    EXPECT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(h))), h);
  }
  EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie to even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie to even
  NDArray h(DType::kFloat16, {2});
  h.set(0, 0.1);
  EXPECT_NEAR(h.get(0), 0.1, 1e-4);
  EXPECT_NE(h.get(0), 0.1);
  NDArray d = h.astype(DType::kFloat64);
  EXPECT_EQ(d.get(0), h.get(0));
}

TEST(OpsNDArray, AllcloseReportsWorstElementAndShape) {
  NDArray a(DType::kFloat32, {4}), b(DType::kFloat64, {4});
  for (int i = 0; i < 4; ++i) {
    a.set(i, i);
    b.set(i, i);
  }
  EXPECT_TRUE(runtime::allclose(a, b).ok);
  a.set(2, 2.5);
  auto r = runtime::allclose(a, b);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.worst_index, 2);
  EXPECT_NE(r.message.find("index 2"), std::string::npos) << r.message;
  NDArray c(DType::kFloat32, {2, 2});
  r = runtime::allclose(a, c);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("shape mismatch"), std::string::npos);
}

// ---- run_reference ---------------------------------------------------------------------------

TEST(OpsReference, SharedIntermediatesAndSeveralOutputs) {
  Tensor a = ir::placeholder("A", dims({3, 4}));
  Tensor b = ir::placeholder("B", dims({4, 2}));
  Tensor c = ops::matmul(a, b);
  Tensor r = ops::relu(c);
  Tensor s = ops::reduce_sum(c, {1});
  Tensor both = ops::add(r, ops::reshape(s, dims({3, 1})));
  auto av = rand({3, 4}, 1), bv = rand({4, 2}, 2);
  auto out = ops::run_reference({both, c, a}, {{a.get(), av}, {b.get(), bv}});
  ASSERT_EQ(out.size(), 3u);
  NDArray cw = naive::matmul(av, bv);
  NDArray rw = naive::map(cw, [](double v) { return std::max(v, 0.0); });
  NDArray sw = naive::reduce(cw, {1}, true, naive::Red::kSum);
  EXPECT_TRUE(all_close(out[0], naive::zip(rw, sw, [](double x, double y) { return x + y; })));
  EXPECT_TRUE(all_close(out[1], cw));
  EXPECT_TRUE(all_close(out[2], av, 0, 0));  // a placeholder output is its input
}

// An int64 sum past the type's range wraps around as PyTorch's does (found by the fuzzer:
// the interpreter's plain signed add was undefined behaviour).
TEST(OpsReference, IntegerSumsWrapAround) {
  Tensor a = ir::placeholder("A", dims({2}), DType::kInt64);
  Tensor s = ops::reduce_sum(a, {0});
  NDArray av(DType::kInt64, {2});
  const int64_t big = std::numeric_limits<int64_t>::max();
  av.set_int(0, big);
  av.set_int(1, 2);
  auto out = ops::run_reference({s}, {{a.get(), av}});
  EXPECT_EQ(out[0].get_int(0), std::numeric_limits<int64_t>::min() + 1);
}

TEST(OpsReference, SymbolicSizesFromArgumentsAndInputs) {
  Var n = ir::size_var("N", 1, 16), k = ir::size_var("K", 1, 16);
  Tensor x = ir::placeholder("X", {n});
  // The reduction extent K appears in no placeholder shape: it must be passed explicitly.
  Tensor y = ir::reduce("window_sum", {n}, {k}, ir::ReduceKind::kSum,
                        [&](const std::vector<Var>& i, const std::vector<Var>& r) {
                          Expr idx = ir::floormod(i[0] + r[0], Expr(n));
                          return ir::access(x, {idx});
                        });
  auto xv = rand({5}, 3);
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({y}, {{x.get(), xv}});
      },
      "no value for size variable K"));
  auto got = ops::run_reference({y}, {{x.get(), xv}}, {{k.get(), 3}})[0];
  for (int64_t i = 0; i < 5; ++i) {
    double want = xv.get(i) + xv.get((i + 1) % 5) + xv.get((i + 2) % 5);
    EXPECT_NEAR(got.get(i), want, 1e-6);
  }
  // An explicit N that contradicts the input array is reported.
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({y}, {{x.get(), xv}}, {{k.get(), 3}, {n.get(), 6}});
      },
      "has shape [5], expected [6]"));
}

TEST(OpsReference, ReportsBadInputs) {
  Tensor a = ir::placeholder("A", dims({2, 3}));
  Tensor b = ir::placeholder("B", dims({2, 3}));
  Tensor y = ops::add(a, b);
  auto av = rand({2, 3}, 4);
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({y}, {{a.get(), av}});
      },
      "no input array for placeholder B"));
  auto wrong_shape = rand({3, 2}, 5);
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({y}, {{a.get(), av}, {b.get(), wrong_shape}});
      },
      "has shape [3, 2]"));
  NDArray wrong_dtype(DType::kFloat64, {2, 3});
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({y}, {{a.get(), av}, {b.get(), wrong_dtype}});
      },
      "float64"));
}

TEST(OpsReference, OutOfBoundsReadsAreErrorsUnlessPadded) {
  Tensor a = ir::placeholder("A", dims({4}));
  // A buggy definition: reads one past the end.
  Tensor shifted = ir::compute(
      "shifted", dims({4}), [&](const std::vector<Var>& i) { return ir::access(a, {i[0] + 1}); });
  auto av = rand({4}, 6);
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::run_reference({shifted}, {{a.get(), av}});
      },
      "out-of-bounds read A[4]"));
  ops::ReferenceOptions opts;
  opts.out_of_bounds_reads_pad_value = true;
  auto got = ops::run_reference({shifted}, {{a.get(), av}}, {}, opts)[0];
  EXPECT_EQ(got.get(3), 0.0);  // A's pad_value
  EXPECT_EQ(got.get(0), av.get(1));
}

TEST(OpsReference, MaxPropagatesNaNAndEmptyReductionsGiveIdentity) {
  Tensor x = ir::placeholder("X", dims({2, 3}));
  NDArray xv = rand({2, 3}, 7);
  xv.set(1, NAN);
  auto got = ops::run_reference({ops::reduce_max(x, {1})}, {{x.get(), xv}})[0];
  EXPECT_TRUE(std::isnan(got.get(0)));
  EXPECT_FALSE(std::isnan(got.get(1)));

  Var n = ir::size_var("N", 0, 8);
  Tensor e = ir::placeholder("E", {ir::int_imm(2), n});
  NDArray ev(DType::kFloat32, {2, 0});
  auto r = ops::run_reference({ops::reduce_sum(e, {1}), ops::reduce_max(e, {1})}, {{e.get(), ev}});
  EXPECT_EQ(r[0].get(0), 0.0);
  EXPECT_EQ(r[1].get(1), -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace tessera
