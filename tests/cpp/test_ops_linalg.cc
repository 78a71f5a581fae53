// matmul / batch_matmul / dense against naive loops, their op structure, symbolic sizes, errors.
#include <gtest/gtest.h>

#include "naive_ops.h"
#include "ops/linalg.h"

namespace tessera {
namespace {

using ir::DType;
using ir::Tensor;
using optest::all_close;
using optest::dims;
using optest::rand;
using optest::reference;

struct MatmulCase {
  int64_t m, k, n;
  bool ta, tb;
};

class OpsMatmulTest : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(OpsMatmulTest, MatchesNaive) {
  const MatmulCase c = GetParam();
  const std::vector<int64_t> as =
      c.ta ? std::vector<int64_t>{c.k, c.m} : std::vector<int64_t>{c.m, c.k};
  const std::vector<int64_t> bs =
      c.tb ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
  Tensor a = ir::placeholder("A", dims(as));
  Tensor b = ir::placeholder("B", dims(bs));
  Tensor out = ops::matmul(a, b, c.ta, c.tb);
  ASSERT_EQ(out->ndim(), 2);
  auto av = rand(as, 1), bv = rand(bs, 2);
  EXPECT_TRUE(all_close(reference(out, {{a, &av}, {b, &bv}}), naive::matmul(av, bv, c.ta, c.tb)));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OpsMatmulTest,
    ::testing::Values(MatmulCase{5, 7, 3, false, false}, MatmulCase{5, 7, 3, true, false},
                      MatmulCase{5, 7, 3, false, true}, MatmulCase{5, 7, 3, true, true},
                      MatmulCase{1, 9, 4, false, false}, MatmulCase{4, 1, 6, true, true},
                      MatmulCase{6, 8, 1, false, true}));

TEST(OpsLinalg, MatmulIsOneReduceOfAProduct) {
  Tensor a = ir::placeholder("A", dims({4, 6}));
  Tensor b = ir::placeholder("B", dims({6, 5}));
  Tensor c = ops::matmul(a, b);
  auto dag = ir::collect_dag({c});
  ASSERT_EQ(dag.computes.size(), 1u);
  const ir::ComputeOpNode& op = *c->op;
  EXPECT_EQ(op.tag, "matmul");
  EXPECT_EQ(op.reduce, ir::ReduceKind::kSum);
  ASSERT_EQ(op.reduce_axes.size(), 1u);
  ASSERT_EQ(op.body->kind, ir::ExprKind::kMul);
  const ir::Expr& lhs = op.body->operands[0];
  const ir::Expr& rhs = op.body->operands[1];
  ASSERT_EQ(lhs->kind, ir::ExprKind::kAccess);
  ASSERT_EQ(rhs->kind, ir::ExprKind::kAccess);
  EXPECT_EQ(lhs->tensor, a);
  EXPECT_EQ(rhs->tensor, b);
  // A[i, k] * B[k, j]
  EXPECT_TRUE(lhs->operands[0].same_as(op.axes[0].var));
  EXPECT_TRUE(lhs->operands[1].same_as(op.reduce_axes[0].var));
  EXPECT_TRUE(rhs->operands[0].same_as(op.reduce_axes[0].var));
  EXPECT_TRUE(rhs->operands[1].same_as(op.axes[1].var));
  EXPECT_EQ(c->name, "matmul");
  EXPECT_EQ(ops::matmul(a, b, false, false, "C")->name, "C");
}

TEST(OpsLinalg, MatmulFloat64IsExactToRounding) {
  Tensor a = ir::placeholder("A", dims({3, 4}), DType::kFloat64);
  Tensor b = ir::placeholder("B", dims({4, 2}), DType::kFloat64);
  auto av = runtime::NDArray::random(DType::kFloat64, {3, 4}, 7);
  auto bv = runtime::NDArray::random(DType::kFloat64, {4, 2}, 8);
  auto got = reference(ops::matmul(a, b), {{a, &av}, {b, &bv}});
  EXPECT_EQ(got.dtype, DType::kFloat64);
  EXPECT_TRUE(all_close(got, naive::matmul(av, bv), 1e-13, 1e-14));
}

TEST(OpsLinalg, MatmulSymbolicSizes) {
  ir::Var m = ir::size_var("M", 1, 64), k = ir::size_var("K", 1, 64), n = ir::size_var("N", 1, 64);
  Tensor a = ir::placeholder("A", {m, k});
  Tensor b = ir::placeholder("B", {k, n});
  for (bool tb : {false, true}) {
    Tensor bt = tb ? ir::placeholder("Bt", {n, k}) : b;
    Tensor c = ops::matmul(a, bt, false, tb);
    for (auto [mv, kv, nv] :
         {std::tuple<int64_t, int64_t, int64_t>{2, 3, 4}, {5, 1, 3}, {7, 6, 2}}) {
      auto av = rand({mv, kv}, 3),
           bv = rand(tb ? std::vector<int64_t>{nv, kv} : std::vector<int64_t>{kv, nv}, 4);
      std::map<const ir::ExprNode*, int64_t> sizes{{m.get(), mv}, {k.get(), kv}, {n.get(), nv}};
      auto got = reference(c, {{a, &av}, {bt, &bv}}, sizes);
      EXPECT_EQ(got.shape, (std::vector<int64_t>{mv, nv}));
      EXPECT_TRUE(all_close(got, naive::matmul(av, bv, false, tb)));
    }
  }
}

struct BmmCase {
  int64_t bt, m, k, n;
  bool ta, tb;
};
class OpsBatchMatmulTest : public ::testing::TestWithParam<BmmCase> {};

TEST_P(OpsBatchMatmulTest, MatchesNaive) {
  const BmmCase c = GetParam();
  const std::vector<int64_t> as =
      c.ta ? std::vector<int64_t>{c.bt, c.k, c.m} : std::vector<int64_t>{c.bt, c.m, c.k};
  const std::vector<int64_t> bs =
      c.tb ? std::vector<int64_t>{c.bt, c.n, c.k} : std::vector<int64_t>{c.bt, c.k, c.n};
  Tensor a = ir::placeholder("A", dims(as));
  Tensor b = ir::placeholder("B", dims(bs));
  Tensor out = ops::batch_matmul(a, b, c.ta, c.tb);
  EXPECT_EQ(out->op->tag, "batch_matmul");
  EXPECT_EQ(out->op->body->kind, ir::ExprKind::kMul);
  auto av = rand(as, 5), bv = rand(bs, 6);
  EXPECT_TRUE(
      all_close(reference(out, {{a, &av}, {b, &bv}}), naive::batch_matmul(av, bv, c.ta, c.tb)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, OpsBatchMatmulTest,
                         ::testing::Values(BmmCase{3, 4, 5, 2, false, false},
                                           BmmCase{2, 3, 5, 4, true, false},
                                           BmmCase{2, 3, 5, 4, false, true},
                                           BmmCase{1, 3, 2, 5, true, true},
                                           BmmCase{4, 1, 3, 1, false, false}));

TEST(OpsLinalg, DenseWithAndWithoutBias) {
  Tensor x = ir::placeholder("X", dims({5, 7}));
  Tensor w = ir::placeholder("W", dims({3, 7}));
  Tensor bias = ir::placeholder("bias", dims({3}));
  auto xv = rand({5, 7}, 9), wv = rand({3, 7}, 10), bv = rand({3}, 11);

  Tensor y = ops::dense(x, w);
  EXPECT_EQ(y->op->tag, "dense");
  EXPECT_EQ(y->op->body->kind, ir::ExprKind::kMul);
  EXPECT_TRUE(all_close(reference(y, {{x, &xv}, {w, &wv}}), naive::dense(xv, wv)));

  Tensor yb = ops::dense(x, w, bias);
  // The bias is a separate elementwise epilogue reading the product.
  EXPECT_EQ(yb->op->tag, "elementwise");
  EXPECT_EQ(yb->name, "dense_bias");
  auto dag = ir::collect_dag({yb});
  ASSERT_EQ(dag.computes.size(), 2u);
  EXPECT_EQ(dag.computes[0]->op->tag, "dense");
  EXPECT_EQ(dag.computes[0]->op->body->kind, ir::ExprKind::kMul);
  EXPECT_TRUE(
      all_close(reference(yb, {{x, &xv}, {w, &wv}, {bias, &bv}}), naive::dense(xv, wv, &bv)));
}

TEST(OpsLinalg, ShapeErrorsAreClear) {
  Tensor a = ir::placeholder("A", dims({4, 6}));
  Tensor b = ir::placeholder("B", dims({5, 3}));
  EXPECT_TRUE(optest::throws_with([&] { ops::matmul(a, b); }, "matmul: reduction dims differ"));
  EXPECT_TRUE(optest::throws_with([&] { ops::matmul(a, b, false, true); }, "6 vs 3"));
  Tensor v = ir::placeholder("v", dims({4}));
  EXPECT_TRUE(optest::throws_with([&] { ops::matmul(v, b); }, "must have 2 dims"));
  Tensor d = ir::placeholder("D", dims({6, 3}), DType::kFloat64);
  EXPECT_TRUE(optest::throws_with([&] { ops::matmul(a, d); }, "dtypes differ"));
  Tensor a3 = ir::placeholder("A3", dims({2, 4, 6}));
  Tensor b3 = ir::placeholder("B3", dims({3, 6, 2}));
  EXPECT_TRUE(optest::throws_with([&] { ops::batch_matmul(a3, b3); }, "batch dims differ"));
  Tensor w = ir::placeholder("W", dims({3, 5}));
  EXPECT_TRUE(optest::throws_with([&] { ops::dense(a, w); }, "in_features differ"));
  Tensor w2 = ir::placeholder("W2", dims({3, 6}));
  Tensor bias = ir::placeholder("bias", dims({4}));
  EXPECT_TRUE(optest::throws_with([&] { ops::dense(a, w2, bias); }, "bias"));
}

}  // namespace
}  // namespace tessera
