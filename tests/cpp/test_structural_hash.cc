// Structural hash / equality: renaming and summation order must not matter; everything that
// changes the computation must.
#include <gtest/gtest.h>

#include "ir/structural_hash.h"
#include "ir/tensor.h"

namespace tessera::ir {
namespace {

// C[i, j] = sum(k) A[i, k] * B[k, j], built with the given names.
Tensor matmul(const std::string& a, const std::string& b, const std::string& c, int64_t m = 64,
              int64_t n = 32, int64_t k = 16, DType t = DType::kFloat32) {
  Tensor A = placeholder(a, {int_imm(m), int_imm(k)}, t);
  Tensor B = placeholder(b, {int_imm(k), int_imm(n)}, t);
  return reduce(c, {int_imm(m), int_imm(n)}, {int_imm(k)}, ReduceKind::kSum,
                [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                  return access(A, {ax[0], r[0]}) * access(B, {r[0], ax[1]});
                });
}

void expect_same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  EXPECT_TRUE(structural_equal(a, b));
  EXPECT_TRUE(structural_equal(b, a));
  EXPECT_EQ(structural_hash(a), structural_hash(b));
}

void expect_different(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  EXPECT_FALSE(structural_equal(a, b));
  EXPECT_FALSE(structural_equal(b, a));
  EXPECT_NE(structural_hash(a), structural_hash(b));
}

TEST(StructuralHash, RenamedCopiesAreEqual) {
  expect_same({matmul("A", "B", "C")}, {matmul("X", "W", "Y")});
  // Same definition built twice: different variable objects, same structure.
  expect_same({matmul("A", "B", "C")}, {matmul("A", "B", "C")});
  EXPECT_TRUE(structural_equal({matmul("A", "B", "C")}, {matmul("P", "Q", "R")}));
}

TEST(StructuralHash, ShapesDtypesAndReductionsMatter) {
  Tensor base = matmul("A", "B", "C");
  expect_different({base}, {matmul("A", "B", "C", 64, 32, 17)});
  expect_different({base}, {matmul("A", "B", "C", 65, 32, 16)});
  expect_different({base}, {matmul("A", "B", "C", 64, 32, 16, DType::kFloat64)});
  // Max instead of sum.
  Tensor A = placeholder("A", {int_imm(64), int_imm(16)});
  Tensor B = placeholder("B", {int_imm(16), int_imm(32)});
  Tensor mx = reduce("C", {int_imm(64), int_imm(32)}, {int_imm(16)}, ReduceKind::kMax,
                     [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                       return access(A, {ax[0], r[0]}) * access(B, {r[0], ax[1]});
                     });
  expect_different({base}, {mx});
  // + instead of *.
  Tensor add = reduce("C", {int_imm(64), int_imm(32)}, {int_imm(16)}, ReduceKind::kSum,
                      [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                        return access(A, {ax[0], r[0]}) + access(B, {r[0], ax[1]});
                      });
  expect_different({base}, {add});
}

TEST(StructuralHash, ConstantsMatter) {
  Tensor A = placeholder("A", {int_imm(8)});
  auto scaled = [&](double c) {
    return compute("S", {int_imm(8)},
                   [&](const std::vector<Var>& i) { return access(A, {i[0]}) * float_imm(c); });
  };
  expect_same({scaled(2.0)}, {scaled(2.0)});
  expect_different({scaled(2.0)}, {scaled(3.0)});
  expect_different({scaled(0.0)}, {scaled(-0.0)});
}

TEST(StructuralHash, SameInputTwiceDiffersFromTwoInputs) {
  Tensor A = placeholder("A", {int_imm(8)}), B = placeholder("B", {int_imm(8)});
  Tensor sq = compute("S", {int_imm(8)}, [&](const std::vector<Var>& i) {
    return access(A, {i[0]}) * access(A, {i[0]});
  });
  Tensor prod = compute("S", {int_imm(8)}, [&](const std::vector<Var>& i) {
    return access(A, {i[0]}) * access(B, {i[0]});
  });
  expect_different({sq}, {prod});
}

TEST(StructuralHash, SummationOrderDoesNotMatter) {
  // C[i] = sum(k1 in 0..4, k2 in 0..8) A[i, k1, k2]  written with the axes listed both ways.
  Tensor A = placeholder("A", {int_imm(16), int_imm(4), int_imm(8)});
  Tensor c1 = reduce("C", {int_imm(16)}, {int_imm(4), int_imm(8)}, ReduceKind::kSum,
                     [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                       return access(A, {ax[0], r[0], r[1]});
                     });
  Tensor A2 = placeholder("A2", {int_imm(16), int_imm(4), int_imm(8)});
  Tensor c2 = reduce("D", {int_imm(16)}, {int_imm(8), int_imm(4)}, ReduceKind::kSum,
                     [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                       return access(A2, {ax[0], r[1], r[0]});
                     });
  expect_same({c1}, {c2});
}

TEST(StructuralHash, SameRangeSummationIteratorsAreNotConfused) {
  // sum(k1, k2) A[i, k1, k2] * B[k1, k2]  vs  sum(k1, k2) A[i, k1, k2] * B[k2, k1]:
  // both iterators have the same range, but the second reads B transposed.
  Tensor A = placeholder("A", {int_imm(16), int_imm(8), int_imm(8)});
  Tensor B = placeholder("B", {int_imm(8), int_imm(8)});
  auto make = [&](bool transposed) {
    return reduce("C", {int_imm(16)}, {int_imm(8), int_imm(8)}, ReduceKind::kSum,
                  [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                    Expr b = transposed ? access(B, {r[1], r[0]}) : access(B, {r[0], r[1]});
                    return access(A, {ax[0], r[0], r[1]}) * b;
                  });
  };
  expect_same({make(false)}, {make(false)});
  expect_same({make(true)}, {make(true)});
  expect_different({make(false)}, {make(true)});
}

TEST(StructuralHash, IteratorsMatchByRoleNotByListPosition) {
  // sum(a, b) X[a] * X[b] * Y[a] vs the same with the iterator list in the other order: the
  // iterators of the two sides only match under a swap.
  Tensor X = placeholder("X", {int_imm(8)}), Y = placeholder("Y", {int_imm(8)});
  auto make = [&](bool swap) {
    return reduce("C", {int_imm(1)}, {int_imm(8), int_imm(8)}, ReduceKind::kSum,
                  [&](const std::vector<Var>&, const std::vector<Var>& r) {
                    Var p = swap ? r[1] : r[0], q = swap ? r[0] : r[1];
                    return access(X, {p}) * access(X, {q}) * access(Y, {p});
                  });
  };
  expect_same({make(false)}, {make(true)});
}

TEST(StructuralHash, UnusedIteratorsMatchByExtent) {
  // Iterators that do not occur in the body have identical (empty) occurrence signatures; only
  // the permutation search pairs them by extent.
  Tensor A = placeholder("A", {int_imm(4)});
  auto make = [&](int64_t e0, int64_t e1) {
    return reduce(
        "C", {int_imm(4)}, {int_imm(e0), int_imm(e1)}, ReduceKind::kSum,
        [&](const std::vector<Var>& ax, const std::vector<Var>&) { return access(A, {ax[0]}); });
  };
  expect_same({make(4, 8)}, {make(8, 4)});
  expect_different({make(4, 8)}, {make(4, 4)});
}

TEST(StructuralHash, NestedDagsAndSizeVariables) {
  Var n = size_var("n", 1, 4096);
  auto build = [&](const std::string& prefix, bool relu_first) {
    Tensor A = placeholder(prefix + "A", {n, int_imm(16)});
    Tensor B = placeholder(prefix + "B", {int_imm(16), int_imm(8)});
    Tensor C = reduce(prefix + "C", {n, int_imm(8)}, {int_imm(16)}, ReduceKind::kSum,
                      [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                        return access(A, {ax[0], r[0]}) * access(B, {r[0], ax[1]});
                      });
    return compute(prefix + "D", {n, int_imm(8)}, [&](const std::vector<Var>& ax) {
      Expr v = access(C, {ax[0], ax[1]});
      return relu_first ? relu(v) + float_imm(1.0) : relu(v + float_imm(1.0));
    });
  };
  expect_same({build("x", true)}, {build("y", true)});
  expect_different({build("x", true)}, {build("x", false)});
  // A different size variable with the same bounds is a renaming too.
  Var m = size_var("m", 1, 4096);
  Tensor P = placeholder("P", {m});
  Tensor Q = placeholder("Q", {n});
  Tensor pp = compute("O", {m}, [&](const std::vector<Var>& i) { return access(P, {i[0]}); });
  Tensor qq = compute("O", {n}, [&](const std::vector<Var>& i) { return access(Q, {i[0]}); });
  expect_same({pp}, {qq});
  Var k = size_var("k", 1, 100);  // different bounds: a different workload
  Tensor R = placeholder("R", {k});
  Tensor rr = compute("O", {k}, [&](const std::vector<Var>& i) { return access(R, {i[0]}); });
  expect_different({pp}, {rr});
}

TEST(StructuralHash, OutputListsAndSharing) {
  Tensor A = placeholder("A", {int_imm(8)});
  Tensor x = compute("X", {int_imm(8)},
                     [&](const std::vector<Var>& i) { return access(A, {i[0]}) + float_imm(1.0); });
  Tensor y = compute("Y", {int_imm(8)},
                     [&](const std::vector<Var>& i) { return access(A, {i[0]}) + float_imm(1.0); });
  // [x, x] (one tensor twice) is not [x, y] (two tensors computing the same thing).
  expect_different({x, x}, {x, y});
  expect_same({x, y}, {y, x});
  EXPECT_FALSE(structural_equal({x}, {x, y}));
}

TEST(StructuralHash, Expressions) {
  Var i = var("i", 0, 15), j = var("j", 0, 15), k = var("k", 0, 31);
  Var p = var("p", 0, 15), q = var("q", 0, 15);
  EXPECT_TRUE(structural_equal(i * 16 + j, p * 16 + q));
  EXPECT_EQ(structural_hash(i * 16 + j), structural_hash(p * 16 + q));
  EXPECT_TRUE(structural_equal(i + j, j + i));  // a consistent renaming swaps them
  EXPECT_FALSE(structural_equal(i + i, i + j));
  EXPECT_NE(structural_hash(i + i), structural_hash(i + j));
  EXPECT_FALSE(structural_equal(i * 16 + j, k * 16 + j));  // different bounds
  EXPECT_NE(structural_hash(i * 16 + j), structural_hash(k * 16 + j));
  EXPECT_FALSE(structural_equal(i * 16 + j, i * 8 + j));
  EXPECT_FALSE(structural_equal(floordiv(i, 4), floormod(i, 4)));
  EXPECT_NE(structural_hash(floordiv(i, 4)), structural_hash(floormod(i, 4)));
  EXPECT_FALSE(structural_equal(int_imm(1), int_imm(1, DType::kInt32)));
  Tensor A = placeholder("A", {int_imm(16)}), B = placeholder("B", {int_imm(16)});
  EXPECT_TRUE(structural_equal(access(A, {i}), access(B, {j})));
  EXPECT_FALSE(structural_equal(access(A, {i}) + access(A, {j}), access(A, {i}) + access(B, {j})));
}

}  // namespace
}  // namespace tessera::ir
