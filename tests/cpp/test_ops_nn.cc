// softmax / log_softmax / layer_norm against naive loops.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/nn.h"

namespace tessera {
namespace {

using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

TEST(OpsSoftmax, AxesMatchNaive) {
  const std::vector<int64_t> shape = {3, 4, 5};
  Tensor x = ir::placeholder("X", dims(shape));
  // Large-magnitude inputs: a non-stable softmax would overflow exp().
  auto xv = rand(shape, 71, -60.0, 90.0);
  for (int64_t axis : {0, 1, 2, -1, -2}) {
    const int norm = static_cast<int>(axis < 0 ? axis + 3 : axis);
    EXPECT_TRUE(all_close(reference(ops::softmax(x, axis), {{x, &xv}}), naive::softmax(xv, norm)))
        << "axis " << axis;
    EXPECT_TRUE(all_close(reference(ops::log_softmax(x, axis), {{x, &xv}}),
                          naive::softmax(xv, norm, true), 1e-5, 1e-5))
        << "axis " << axis;
  }
}

TEST(OpsSoftmax, SizeOneAxisAndStructure) {
  Tensor x = ir::placeholder("X", dims({4, 1}));
  auto xv = rand({4, 1}, 72);
  EXPECT_TRUE(all_close(reference(ops::softmax(x, 1), {{x, &xv}}), naive::softmax(xv, 1)));
  Tensor y = ops::softmax(ir::placeholder("Z", dims({2, 8})));
  auto dag = ir::collect_dag({y});
  ASSERT_EQ(dag.computes.size(), 4u);
  EXPECT_EQ(dag.computes[0]->name, "softmax_max");
  EXPECT_EQ(dag.computes[0]->op->reduce, ir::ReduceKind::kMax);
  EXPECT_EQ(dag.computes[1]->name, "softmax_exp");
  EXPECT_EQ(dag.computes[2]->op->reduce, ir::ReduceKind::kSum);
  EXPECT_EQ(y->name, "softmax");
  EXPECT_TRUE(optest::throws_with([&] { ops::softmax(x, 2); }, "out of range"));
}

TEST(OpsSoftmax, SymbolicRowLength) {
  ir::Var n = ir::size_var("N", 1, 512);
  Tensor x = ir::placeholder("X", {ir::int_imm(3), n});
  Tensor y = ops::softmax(x, -1);
  for (int64_t nv : {1, 7, 16}) {
    auto xv = rand({3, nv}, 73, -5, 5);
    EXPECT_TRUE(all_close(reference(y, {{x, &xv}}), naive::softmax(xv, 1)));
  }
}

TEST(OpsLayerNorm, MatchesNaive) {
  const std::vector<int64_t> shape = {2, 3, 6};
  Tensor x = ir::placeholder("X", dims(shape));
  auto xv = rand(shape, 74, -3, 5);
  for (int nd : {1, 2, 3}) {
    const std::vector<int64_t> ns(shape.end() - nd, shape.end());
    Tensor g = ir::placeholder("gamma", dims(ns));
    Tensor b = ir::placeholder("beta", dims(ns));
    auto gv = rand(ns, 75), bv = rand(ns, 76);
    EXPECT_TRUE(
        all_close(reference(ops::layer_norm(x, nd, g, b, 1e-5), {{x, &xv}, {g, &gv}, {b, &bv}}),
                  naive::layer_norm(xv, nd, &gv, &bv, 1e-5), 1e-5, 1e-5))
        << "normalized_ndim " << nd;
    EXPECT_TRUE(all_close(reference(ops::layer_norm(x, nd, g, nullptr, 0.1), {{x, &xv}, {g, &gv}}),
                          naive::layer_norm(xv, nd, &gv, nullptr, 0.1), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(reference(ops::layer_norm(x, nd), {{x, &xv}}),
                          naive::layer_norm(xv, nd, nullptr, nullptr, 1e-5), 1e-5, 1e-5));
  }
}

TEST(OpsLayerNorm, Errors) {
  Tensor x = ir::placeholder("X", dims({2, 6}));
  Tensor g = ir::placeholder("gamma", dims({5}));
  EXPECT_TRUE(optest::throws_with([&] { ops::layer_norm(x, 1, g); }, "normalized shape"));
  EXPECT_TRUE(optest::throws_with([&] { ops::layer_norm(x, 3); }, "normalized_ndim"));
  Tensor xi = ir::placeholder("XI", dims({2, 6}), ir::DType::kInt32);
  EXPECT_TRUE(optest::throws_with([&] { ops::layer_norm(xi, 1); }, "float"));
}

}  // namespace
}  // namespace tessera
