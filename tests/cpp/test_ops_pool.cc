// avg_pool2d / max_pool2d against torch-style naive loops: strides, padding, dilation,
// ceil_mode (incl. dropped windows), count_include_pad, structure and errors.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/pool.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

struct PoolCase {
  int64_t h, w, k, s, p, d;
  bool ceil_mode, count_include_pad;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) {
  return os << "HxW=" << c.h << "x" << c.w << " k=" << c.k << " s=" << c.s << " p=" << c.p
            << " d=" << c.d << " ceil=" << c.ceil_mode << " cip=" << c.count_include_pad;
}

const std::vector<PoolCase> kCases = {
    {7, 7, 2, 2, 0, 1, false, true},
    {7, 7, 2, 2, 0, 1, true, true},
    {8, 6, 3, 2, 1, 1, false, true},
    {8, 6, 3, 2, 1, 1, false, false},
    {8, 6, 3, 2, 1, 1, true, true},
    {8, 6, 3, 2, 1, 1, true, false},
    {5, 5, 3, 3, 1, 1, true, true},
    {6, 9, 3, 1, 1, 1, false, false},
    {9, 7, 4, 3, 2, 1, true, false},
    {9, 7, 4, 3, 2, 1, true, true},
    {4, 4, 4, 4, 0, 1, false, true},
    {1, 5, 1, 2, 0, 1, true, true},
    // ceil_mode where the last window would start inside the right padding, so torch drops it
    // (H=6, k=2, s=4, p=1: 3 windows by the ceil formula, the third starts at 8-1 >= 6).
    {6, 6, 2, 4, 1, 1, true, true},
    {5, 5, 2, 3, 1, 1, true, false},
};

class OpsPoolTest : public ::testing::TestWithParam<PoolCase> {};

// Dilation only exists for max pooling.
const std::vector<PoolCase> kDilatedCases = {
    {10, 10, 3, 2, 1, 2, false, true},
    {11, 9, 3, 2, 1, 2, true, true},
    {9, 9, 2, 1, 1, 3, true, true},
};

TEST_P(OpsPoolTest, MaxPoolMatchesNaive) {
  const PoolCase c = GetParam();
  Tensor x = ir::placeholder("X", dims({2, 3, c.h, c.w}));
  Tensor y = ops::max_pool2d(x, {c.k, c.k}, {c.s, c.s}, {c.p, c.p}, {c.d, c.d}, c.ceil_mode);
  auto xv = rand({2, 3, c.h, c.w}, 51);
  EXPECT_TRUE(
      all_close(reference(y, {{x, &xv}}), naive::max_pool2d(xv, c.k, c.s, c.p, c.d, c.ceil_mode)));
}

TEST_P(OpsPoolTest, AvgPoolMatchesNaive) {
  const PoolCase c = GetParam();
  Tensor x = ir::placeholder("X", dims({2, 3, c.h, c.w}));
  Tensor y =
      ops::avg_pool2d(x, {c.k, c.k}, {c.s, c.s}, {c.p, c.p}, c.ceil_mode, c.count_include_pad);
  // Positive inputs so that a wrong divisor cannot hide behind cancellation.
  auto xv = rand({2, 3, c.h, c.w}, 52, 0.5, 1.5);
  EXPECT_TRUE(all_close(reference(y, {{x, &xv}}),
                        naive::avg_pool2d(xv, c.k, c.s, c.p, c.ceil_mode, c.count_include_pad)));
}

INSTANTIATE_TEST_SUITE_P(Params, OpsPoolTest, ::testing::ValuesIn(kCases));

class OpsDilatedMaxPoolTest : public ::testing::TestWithParam<PoolCase> {};

TEST_P(OpsDilatedMaxPoolTest, MatchesNaive) {
  const PoolCase c = GetParam();
  Tensor x = ir::placeholder("X", dims({1, 2, c.h, c.w}));
  Tensor y = ops::max_pool2d(x, {c.k, c.k}, {c.s, c.s}, {c.p, c.p}, {c.d, c.d}, c.ceil_mode);
  auto xv = rand({1, 2, c.h, c.w}, 55);
  EXPECT_TRUE(
      all_close(reference(y, {{x, &xv}}), naive::max_pool2d(xv, c.k, c.s, c.p, c.d, c.ceil_mode)));
}

INSTANTIATE_TEST_SUITE_P(Params, OpsDilatedMaxPoolTest, ::testing::ValuesIn(kDilatedCases));

TEST(OpsPool, NonSquareParameters) {
  Tensor x = ir::placeholder("X", dims({1, 2, 9, 8}));
  auto xv = rand({1, 2, 9, 8}, 53);
  // Different (h, w) parameters; the naive helpers take square ones, so the loop is inline.
  Tensor y = ops::max_pool2d(x, {3, 2}, {2, 1}, {1, 0}, {1, 2});
  ASSERT_TRUE(y->shape[2]->is_const_int((9 + 2 - 3) / 2 + 1));
  ASSERT_TRUE(y->shape[3]->is_const_int((8 - 3) / 1 + 1));
  auto got = reference(y, {{x, &xv}});
  for (int64_t c = 0; c < 2; ++c) {
    for (int64_t oy = 0; oy < 5; ++oy) {
      for (int64_t ox = 0; ox < 6; ++ox) {
        double m = -1e30;
        for (int64_t ky = 0; ky < 3; ++ky) {
          for (int64_t kx = 0; kx < 2; ++kx) {
            int64_t iy = oy * 2 - 1 + ky, ix = ox + kx * 2;
            if (iy >= 0 && iy < 9 && ix < 8) m = std::max(m, xv.at({0, c, iy, ix}));
          }
        }
        EXPECT_FLOAT_EQ(got.at({0, c, oy, ox}), m);
      }
    }
  }
}

TEST(OpsPool, Structure) {
  Tensor x = ir::placeholder("X", dims({1, 2, 8, 8}));
  Tensor mp = ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  auto dag = ir::collect_dag({mp});
  ASSERT_EQ(dag.computes.size(), 2u);
  EXPECT_EQ(dag.computes[0]->op->tag, "pad");
  EXPECT_EQ(mp->op->tag, "pool_max");
  EXPECT_EQ(mp->op->reduce, ir::ReduceKind::kMax);
  EXPECT_EQ(mp->op->attrs.at("kernel"), "3,3");

  Tensor ap = ops::avg_pool2d(x, {2, 2});  // stride defaults to the kernel
  dag = ir::collect_dag({ap});
  ASSERT_EQ(dag.computes.size(), 2u);  // no padding: sum + divide
  EXPECT_EQ(dag.computes[0]->op->tag, "pool_avg");
  EXPECT_EQ(dag.computes[0]->op->reduce, ir::ReduceKind::kSum);
  EXPECT_EQ(ap->op->tag, "elementwise");
  EXPECT_TRUE(ap->shape[2]->is_const_int(4));
}

TEST(OpsPool, SymbolicSize) {
  ir::Var h = ir::size_var("H", 2, 64);
  Tensor x = ir::placeholder("X", {ir::int_imm(1), ir::int_imm(2), h, ir::int_imm(7)});
  Tensor mp = ops::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true);
  Tensor ap = ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false);
  for (int64_t hv : {5, 6, 9}) {
    auto xv = rand({1, 2, hv, 7}, 54, 0.5, 1.5);
    auto r = ops::run_reference({mp, ap}, {{x.get(), xv}});
    EXPECT_TRUE(all_close(r[0], naive::max_pool2d(xv, 3, 2, 1, 1, true))) << "H=" << hv;
    EXPECT_TRUE(all_close(r[1], naive::avg_pool2d(xv, 3, 2, 1, true, false))) << "H=" << hv;
  }
}

TEST(OpsPool, Errors) {
  Tensor x = ir::placeholder("X", dims({1, 2, 8, 8}));
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::max_pool2d(x, {2, 2}, {2, 2}, {2, 2});
      },
      "half the kernel"));
  EXPECT_TRUE(optest::throws_with([&] { ops::avg_pool2d(x, {9, 9}); }, "would be"));
  Tensor x3 = ir::placeholder("X3", dims({2, 8, 8}));
  EXPECT_TRUE(optest::throws_with([&] { ops::max_pool2d(x3, {2, 2}); }, "must have 4 dims"));
}

}  // namespace
}  // namespace tessera
