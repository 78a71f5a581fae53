// Extra operators of the torch.compile backend (ops/extra_*.h): comparisons, logic, clamp,
// rounding, full, arange, index_select/embedding and gather. Each is compiled with the default
// schedule, run through the JIT and compared with loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "compiler/build.h"
#include "ops/elementwise.h"
#include "ops/extra_elementwise.h"
#include "ops/extra_index.h"
#include "runtime/ndarray.h"
#include "util/check.h"

namespace tessera {
namespace {

using ir::DType;
using ir::Tensor;
using runtime::NDArray;

std::vector<ir::Expr> dims(const std::vector<int64_t>& s) {
  std::vector<ir::Expr> out;
  for (int64_t d : s) out.push_back(ir::int_imm(d));
  return out;
}

// Runs the JIT kernel of `out` on `inputs` and returns the output array.
NDArray run(const Tensor& out, const std::vector<Tensor>& ins, std::vector<NDArray*> inputs) {
  compiler::BuiltKernel k = compiler::build_cpu({out}, ins);
  std::vector<int64_t> shape;
  for (const ir::Expr& d : out->shape) shape.push_back(d->int_value);
  NDArray result(out->dtype, shape);
  std::vector<void*> ptrs;
  for (NDArray* a : inputs) ptrs.push_back(a->data());
  ptrs.push_back(result.data());
  k.run(ptrs, {});
  return result;
}

TEST(OpsExtra, ComparisonsWithBroadcastAndScalars) {
  Tensor a = ir::placeholder("A", dims({3, 4}));
  Tensor b = ir::placeholder("B", dims({4}));
  NDArray av = NDArray::random(DType::kFloat32, {3, 4}, 1, -2, 2);
  NDArray bv = NDArray::random(DType::kFloat32, {4}, 2, -2, 2);
  av.set(5, bv.get(1));  // one exact tie, so eq/le/ge see equality
  const std::vector<std::pair<const char*, std::function<bool(double, double)>>> cases = {
      {"eq", [](double x, double y) { return x == y; }},
      {"ne", [](double x, double y) { return x != y; }},
      {"lt", [](double x, double y) { return x < y; }},
      {"le", [](double x, double y) { return x <= y; }},
      {"gt", [](double x, double y) { return x > y; }},
      {"ge", [](double x, double y) { return x >= y; }}};
  for (const auto& [name, f] : cases) {
    ops::Compare cmp = ops::compare_from_name(name);
    NDArray got = run(ops::compare(a, b, cmp), {a, b}, {&av, &bv});
    ASSERT_EQ(got.dtype, DType::kBool);
    NDArray got_s = run(ops::compare(a, 0.25, cmp), {a}, {&av});
    for (int64_t i = 0; i < 12; ++i) {
      EXPECT_EQ(got.get_int(i), f(av.get(i), bv.get(i % 4)) ? 1 : 0) << name << " at " << i;
      EXPECT_EQ(got_s.get_int(i), f(av.get(i), 0.25) ? 1 : 0) << name << " scalar at " << i;
    }
  }
  EXPECT_THROW(ops::compare_from_name("lessthan"), Error);
}

TEST(OpsExtra, LogicOnBoolAndFloat) {
  Tensor a = ir::placeholder("A", dims({2, 5}));
  Tensor m = ir::placeholder("M", dims({5}), DType::kBool);
  NDArray av = NDArray::random(DType::kFloat32, {2, 5}, 3, -1, 1);
  av.set(2, 0.0);
  NDArray mv(DType::kBool, {5});
  for (int64_t i = 0; i < 5; ++i) mv.set_int(i, i % 2);
  NDArray got_and = run(ops::logical_and(a, m), {a, m}, {&av, &mv});
  NDArray got_or = run(ops::logical_or(a, m), {a, m}, {&av, &mv});
  NDArray got_not = run(ops::logical_not(a), {a}, {&av});
  for (int64_t i = 0; i < 10; ++i) {
    const bool x = av.get(i) != 0.0, y = mv.get_int(i % 5) != 0;
    EXPECT_EQ(got_and.get_int(i), x && y) << i;
    EXPECT_EQ(got_or.get_int(i), x || y) << i;
    EXPECT_EQ(got_not.get_int(i), !x) << i;
  }
}

TEST(OpsExtra, ClampFloorCeil) {
  Tensor a = ir::placeholder("A", dims({37}));
  NDArray av = NDArray::random(DType::kFloat32, {37}, 4, -3, 3);
  NDArray both = run(ops::clamp(a, -1.0, 2.0), {a}, {&av});
  NDArray lo = run(ops::clamp(a, 0.5, std::nullopt), {a}, {&av});
  NDArray fl = run(ops::floor(a), {a}, {&av});
  NDArray ce = run(ops::ceil(a), {a}, {&av});
  for (int64_t i = 0; i < 37; ++i) {
    const double v = av.get(i);
    EXPECT_FLOAT_EQ(both.get(i), std::min(std::max(v, -1.0), 2.0));
    EXPECT_FLOAT_EQ(lo.get(i), std::max(v, 0.5));
    EXPECT_FLOAT_EQ(fl.get(i), std::floor(v));
    EXPECT_FLOAT_EQ(ce.get(i), std::ceil(v));
  }
}

TEST(OpsExtra, FullAndArangeFeedOtherOps) {
  Tensor a = ir::placeholder("A", dims({4, 6}));
  NDArray av = NDArray::random(DType::kFloat32, {4, 6}, 5);
  // a * full(2.5) + arange(6) * 0.5 + 1 broadcast along rows.
  Tensor r = ops::arange(ir::int_imm(6), 1.0, 0.5, DType::kFloat32);
  Tensor out = ops::add(ops::mul(a, ops::full(dims({4, 6}), 2.5, DType::kFloat32)), r);
  NDArray got = run(out, {a}, {&av});
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_NEAR(got.get(i), av.get(i) * 2.5 + 1.0 + 0.5 * (i % 6), 1e-5) << i;
  }
  NDArray ints = run(ops::arange(ir::int_imm(5), 3, -2, DType::kInt64), {}, {});
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(ints.get_int(i), 3 - 2 * i);
  EXPECT_THROW(ops::arange(ir::int_imm(5), 0.5, 1, DType::kInt64), Error);
}

TEST(OpsExtra, EmbeddingReadsRowsByIndex) {
  Tensor w = ir::placeholder("W", dims({10, 7}));
  Tensor ids = ir::placeholder("ids", dims({2, 3}), DType::kInt64);
  NDArray wv = NDArray::random(DType::kFloat32, {10, 7}, 6);
  NDArray iv(DType::kInt64, {2, 3});
  const int64_t picks[6] = {9, 0, 3, 3, 7, 1};
  for (int64_t i = 0; i < 6; ++i) iv.set_int(i, picks[i]);
  Tensor e = ops::index_select(w, 0, ids);
  ASSERT_EQ(e->ndim(), 3);
  NDArray got = run(e, {w, ids}, {&wv, &iv});
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t j = 0; j < 7; ++j) {
      EXPECT_EQ(got.get(p * 7 + j), wv.get(picks[p] * 7 + j)) << p << "," << j;
    }
  }
}

TEST(OpsExtra, IndexSelectInnerAxisAndClampedIndices) {
  Tensor x = ir::placeholder("X", dims({3, 8}));
  Tensor ids = ir::placeholder("ids", dims({4}), DType::kInt32);
  NDArray xv = NDArray::random(DType::kFloat32, {3, 8}, 7);
  NDArray iv(DType::kInt32, {4});
  const int64_t picks[4] = {7, 2, 100, -5};  // the last two are clamped to 7 and 0
  const int64_t want[4] = {7, 2, 7, 0};
  for (int64_t i = 0; i < 4; ++i) iv.set_int(i, picks[i]);
  NDArray got = run(ops::index_select(x, 1, ids), {x, ids}, {&xv, &iv});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(got.get(r * 4 + c), xv.get(r * 8 + want[c]));
  }
  EXPECT_THROW(ops::index_select(x, 0, x), Error);
}

TEST(OpsExtra, GatherAlongDim) {
  Tensor x = ir::placeholder("X", dims({3, 5}));
  Tensor idx = ir::placeholder("I", dims({3, 2}), DType::kInt64);
  NDArray xv = NDArray::random(DType::kFloat32, {3, 5}, 8);
  NDArray iv(DType::kInt64, {3, 2});
  const int64_t picks[6] = {4, 0, 1, 1, 3, 2};
  for (int64_t i = 0; i < 6; ++i) iv.set_int(i, picks[i]);
  NDArray got1 = run(ops::gather(x, 1, idx), {x, idx}, {&xv, &iv});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 2; ++c)
      EXPECT_EQ(got1.get(r * 2 + c), xv.get(r * 5 + picks[r * 2 + c]));
  }
  // dim 0: out[i, j] = x[idx[i, j], j]
  Tensor idx0 = ir::placeholder("I0", dims({2, 5}), DType::kInt64);
  NDArray i0(DType::kInt64, {2, 5});
  for (int64_t i = 0; i < 10; ++i) i0.set_int(i, (i * 7) % 3);
  NDArray got0 = run(ops::gather(x, 0, idx0), {x, idx0}, {&xv, &i0});
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(got0.get(i), xv.get(((i * 7) % 3) * 5 + i % 5));
}

}  // namespace
}  // namespace tessera
