// conv2d / conv_transpose2d against naive loops (direct and scatter forms), structure, errors.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/conv.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  naive::Conv2dParams p;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const ConvCase& c) {
  return os << "X[" << c.n << "," << c.c << "," << c.h << "," << c.w << "] O=" << c.o
            << " k=" << c.kh << "x" << c.kw << " s=" << c.p.sh << "," << c.p.sw << " p=" << c.p.ph
            << "," << c.p.pw << " d=" << c.p.dh << "," << c.p.dw << " g=" << c.p.groups;
}

class OpsConv2dTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(OpsConv2dTest, MatchesNaive) {
  const ConvCase c = GetParam();
  const auto& p = c.p;
  Tensor x = ir::placeholder("X", dims({c.n, c.c, c.h, c.w}));
  Tensor w = ir::placeholder("W", dims({c.o, c.c / p.groups, c.kh, c.kw}));
  Tensor b = ir::placeholder("B", dims({c.o}));
  Tensor y =
      ops::conv2d(x, w, c.bias ? b : nullptr, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.groups);
  auto xv = rand({c.n, c.c, c.h, c.w}, 21), wv = rand({c.o, c.c / p.groups, c.kh, c.kw}, 22);
  auto bv = rand({c.o}, 23);
  std::vector<std::pair<Tensor, const runtime::NDArray*>> in = {{x, &xv}, {w, &wv}};
  if (c.bias) in.push_back({b, &bv});
  EXPECT_TRUE(all_close(reference(y, in), naive::conv2d(xv, wv, c.bias ? &bv : nullptr, p)));
}

// {sh, sw, ph, pw, dh, dw, groups}
INSTANTIATE_TEST_SUITE_P(
    Params, OpsConv2dTest,
    ::testing::Values(ConvCase{1, 3, 7, 7, 4, 3, 3, {1, 1, 0, 0, 1, 1, 1}, false},
                      ConvCase{2, 3, 8, 7, 5, 3, 3, {1, 1, 1, 1, 1, 1, 1}, true},
                      ConvCase{1, 2, 9, 9, 3, 3, 3, {2, 2, 1, 1, 1, 1, 1}, true},
                      ConvCase{1, 2, 9, 8, 3, 3, 2, {2, 1, 0, 1, 1, 1, 1}, false},
                      ConvCase{1, 2, 10, 10, 2, 3, 3, {1, 1, 2, 2, 2, 2, 1}, false},
                      ConvCase{1, 3, 11, 9, 2, 3, 3, {3, 2, 2, 1, 2, 3, 1}, true},
                      ConvCase{2, 4, 6, 6, 6, 3, 3, {1, 1, 1, 1, 1, 1, 2}, true},   // groups
                      ConvCase{1, 4, 7, 7, 4, 3, 3, {1, 1, 1, 1, 1, 1, 4}, true},   // depthwise
                      ConvCase{1, 3, 7, 6, 6, 3, 3, {2, 2, 1, 1, 1, 1, 3}, false},  // dw x2
                      ConvCase{1, 3, 5, 5, 4, 1, 1, {1, 1, 0, 0, 1, 1, 1}, true},   // 1x1
                      ConvCase{1, 1, 5, 4, 1, 2, 3, {1, 1, 0, 1, 1, 1, 1}, false},  // C=O=1
                      ConvCase{1, 2, 4, 4, 2, 4, 4, {1, 1, 0, 0, 1, 1, 1}, false}   // 1x1 out
                      ));

TEST(OpsConv2d, PaddingAndBiasAreSeparateOps) {
  Tensor x = ir::placeholder("X", dims({1, 4, 8, 8}));
  Tensor w = ir::placeholder("W", dims({8, 4, 3, 3}));
  Tensor b = ir::placeholder("B", dims({8}));
  Tensor y = ops::conv2d(x, w, b, {2, 2}, {1, 1});
  auto dag = ir::collect_dag({y});
  ASSERT_EQ(dag.computes.size(), 3u);
  EXPECT_EQ(dag.computes[0]->op->tag, "pad");
  EXPECT_EQ(dag.computes[0]->name, "X_pad");
  const Tensor& conv = dag.computes[1];
  EXPECT_EQ(conv->op->tag, "conv2d");
  EXPECT_EQ(conv->op->reduce, ir::ReduceKind::kSum);
  EXPECT_EQ(conv->op->reduce_axes.size(), 3u);
  EXPECT_EQ(conv->op->body->kind, ir::ExprKind::kMul);
  EXPECT_EQ(conv->op->attrs.at("stride"), "2,2");
  EXPECT_EQ(conv->op->attrs.at("padding"), "1,1");
  EXPECT_EQ(conv->op->attrs.at("groups"), "1");
  EXPECT_EQ(y->op->tag, "elementwise");
  // Output extents: (8 + 2 - 3) / 2 + 1 = 4.
  EXPECT_TRUE(y->shape[2]->is_const_int(4));
  // Without padding there is no pad op.
  EXPECT_EQ(ir::collect_dag({ops::conv2d(x, w)}).computes.size(), 1u);
}

TEST(OpsConv2d, DepthwiseHasNoChannelReduction) {
  Tensor x = ir::placeholder("X", dims({1, 4, 6, 6}));
  Tensor w = ir::placeholder("W", dims({4, 1, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1}, {1, 1}, 4);
  auto dag = ir::collect_dag({y});
  const Tensor& conv = dag.computes.back();
  EXPECT_EQ(conv->op->attrs.at("depthwise"), "1");
  EXPECT_EQ(conv->op->reduce_axes.size(), 2u);
}

TEST(OpsConv2d, SymbolicSpatialSize) {
  ir::Var h = ir::size_var("H", 3, 32), wd = ir::size_var("W", 3, 32);
  Tensor x = ir::placeholder("X", {ir::int_imm(1), ir::int_imm(2), h, wd});
  Tensor w = ir::placeholder("K", dims({3, 2, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {2, 1}, {1, 1});
  for (auto [hv, wv] : {std::pair<int64_t, int64_t>{5, 6}, {8, 3}}) {
    auto xv = rand({1, 2, hv, wv}, 31), kv = rand({3, 2, 3, 3}, 32);
    // H and W are bound from the input array's shape.
    auto got = reference(y, {{x, &xv}, {w, &kv}});
    EXPECT_TRUE(all_close(got, naive::conv2d(xv, kv, nullptr, {2, 1, 1, 1, 1, 1, 1})));
  }
}

struct ConvTCase {
  int64_t n, c, h, w, o, kh, kw;
  naive::Conv2dParams p;
  int64_t oph, opw;
  bool bias;
};

std::ostream& operator<<(std::ostream& os, const ConvTCase& c) {
  return os << "X[" << c.n << "," << c.c << "," << c.h << "," << c.w << "] O=" << c.o
            << " k=" << c.kh << "x" << c.kw << " s=" << c.p.sh << "," << c.p.sw << " p=" << c.p.ph
            << "," << c.p.pw << " op=" << c.oph << "," << c.opw << " d=" << c.p.dh << "," << c.p.dw
            << " g=" << c.p.groups;
}

class OpsConvTranspose2dTest : public ::testing::TestWithParam<ConvTCase> {};

TEST_P(OpsConvTranspose2dTest, MatchesScatterForm) {
  const ConvTCase c = GetParam();
  const auto& p = c.p;
  Tensor x = ir::placeholder("X", dims({c.n, c.c, c.h, c.w}));
  Tensor w = ir::placeholder("W", dims({c.c, c.o / p.groups, c.kh, c.kw}));
  Tensor b = ir::placeholder("B", dims({c.o}));
  Tensor y = ops::conv_transpose2d(x, w, c.bias ? b : nullptr, {p.sh, p.sw}, {p.ph, p.pw},
                                   {c.oph, c.opw}, {p.dh, p.dw}, p.groups);
  auto xv = rand({c.n, c.c, c.h, c.w}, 41), wv = rand({c.c, c.o / p.groups, c.kh, c.kw}, 42);
  auto bv = rand({c.o}, 43);
  std::vector<std::pair<Tensor, const runtime::NDArray*>> in = {{x, &xv}, {w, &wv}};
  if (c.bias) in.push_back({b, &bv});
  EXPECT_TRUE(all_close(reference(y, in),
                        naive::conv_transpose2d(xv, wv, c.bias ? &bv : nullptr, p, c.oph, c.opw)));
}

INSTANTIATE_TEST_SUITE_P(
    Params, OpsConvTranspose2dTest,
    ::testing::Values(ConvTCase{1, 3, 4, 4, 2, 3, 3, {1, 1, 0, 0, 1, 1, 1}, 0, 0, false},
                      ConvTCase{2, 3, 4, 5, 4, 3, 3, {2, 2, 1, 1, 1, 1, 1}, 1, 1, true},
                      ConvTCase{1, 2, 3, 4, 3, 4, 4, {2, 2, 1, 1, 1, 1, 1}, 0, 0, false},
                      ConvTCase{1, 2, 5, 3, 2, 3, 2, {3, 2, 2, 0, 1, 1, 1}, 2, 1, true},
                      ConvTCase{1, 2, 4, 4, 2, 3, 3, {1, 1, 1, 2, 2, 2, 1}, 1, 0, false},
                      ConvTCase{1, 4, 3, 3, 6, 3, 3, {2, 2, 0, 1, 1, 1, 2}, 0, 1, true},   // groups
                      ConvTCase{1, 3, 4, 4, 3, 3, 3, {2, 2, 1, 1, 1, 1, 3}, 1, 1, false},  // dw
                      ConvTCase{1, 2, 3, 3, 2, 2, 2, {1, 1, 1, 1, 1, 1, 1}, 0, 0, false},  // crop
                      ConvTCase{1, 1, 1, 1, 1, 3, 3, {1, 1, 0, 0, 1, 1, 1}, 0, 0, true}));

TEST(OpsConvTranspose2d, Structure) {
  Tensor x = ir::placeholder("X", dims({1, 4, 5, 5}));
  Tensor w = ir::placeholder("W", dims({4, 2, 3, 3}));
  Tensor y = ops::conv_transpose2d(x, w, nullptr, {2, 2}, {1, 1}, {1, 1});
  // (5-1)*2 - 2 + 2 + 1 + 1 = 10
  EXPECT_TRUE(y->shape[2]->is_const_int(10));
  EXPECT_TRUE(y->shape[1]->is_const_int(2));
  auto dag = ir::collect_dag({y});
  ASSERT_EQ(dag.computes.size(), 2u);
  EXPECT_EQ(dag.computes[0]->op->tag, "pad");
  EXPECT_EQ(dag.computes[0]->name, "X_dilate_pad");
  EXPECT_EQ(y->op->tag, "conv_transpose2d");
  EXPECT_EQ(y->op->attrs.at("output_padding"), "1,1");
  EXPECT_EQ(y->op->body->kind, ir::ExprKind::kMul);
}

TEST(OpsConv, ShapeErrorsAreClear) {
  Tensor x = ir::placeholder("X", dims({1, 4, 8, 8}));
  Tensor w_bad_c = ir::placeholder("W", dims({8, 3, 3, 3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv2d(x, w_bad_c); }, "C/groups input channels"));
  Tensor w = ir::placeholder("W", dims({6, 2, 3, 3}));
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::conv2d(x, w, nullptr, {1, 1}, {0, 0}, {1, 1}, 3);
      },
      "not divisible by groups"));
  Tensor w_big = ir::placeholder("W", dims({2, 4, 9, 9}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv2d(x, w_big); }, "input too small"));
  Tensor w4 = ir::placeholder("W", dims({2, 4, 3, 3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv2d(x, w4, nullptr, {0, 1}); }, "stride"));
  Tensor bias = ir::placeholder("B", dims({3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv2d(x, w4, bias); }, "out channels"));
  Tensor x3 = ir::placeholder("X3", dims({4, 8, 8}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv2d(x3, w4); }, "must have 4 dims"));
  Tensor wt = ir::placeholder("WT", dims({3, 2, 3, 3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::conv_transpose2d(x, wt); }, "input channels of X"));
  Tensor wt4 = ir::placeholder("WT", dims({4, 2, 3, 3}));
  EXPECT_TRUE(optest::throws_with(
      [&] {
        ops::conv_transpose2d(x, wt4, nullptr, {2, 2}, {0, 0}, {2, 0});
      },
      "output_padding"));
}

}  // namespace
}  // namespace tessera
