// Printer output for expressions, compute DAGs and loop IR.
#include <gtest/gtest.h>

#include "ir/buffer.h"
#include "ir/printer.h"
#include "ir/tensor.h"
#include "loop/printer.h"

namespace tessera {
namespace {

using namespace ir;  // NOLINT: test brevity

TEST(Printer, IndexArithmetic) {
  Var i = var("i", 0, 63), j = var("j", 0, 15);
  EXPECT_EQ(to_string(floordiv(i * 16 + j, 16)), "(i * 16 + j) // 16");
  EXPECT_EQ(to_string(floormod(i * 16 + j, 16)), "(i * 16 + j) % 16");
  EXPECT_EQ(to_string(i * 16 + floormod(j, 4)), "i * 16 + j % 4");
  EXPECT_EQ(to_string(i - (j - 1)), "i - (j - 1)");
  EXPECT_EQ(to_string((i - j) - 1), "i - j - 1");
  EXPECT_EQ(to_string(i * (j + 1)), "i * (j + 1)");
  EXPECT_EQ(to_string(floordiv(i, floordiv(j, 2))), "i // (j // 2)");
  EXPECT_EQ(to_string(-i), "-i");
  EXPECT_EQ(to_string(i + int_imm(-3)), "i + -3");
  EXPECT_EQ(to_string(min(i, j + 1)), "min(i, j + 1)");
  EXPECT_EQ(to_string(max(i, 0)), "max(i, 0)");
}

TEST(Printer, LogicAndSelect) {
  Var i = var("i", 0, 63), j = var("j", 0, 15);
  EXPECT_EQ(to_string(lt(i * 2, j)), "i * 2 < j");
  EXPECT_EQ(to_string(logical_and(lt(i, 4), ge(j, 2))), "i < 4 && 2 <= j");
  EXPECT_EQ(to_string(logical_or(logical_and(lt(i, 4), lt(j, 2)), eq(i, j))),
            "i < 4 && j < 2 || i == j");
  EXPECT_EQ(to_string(logical_and(logical_or(lt(i, 4), lt(j, 2)), ne(i, j))),
            "(i < 4 || j < 2) && i != j");
  EXPECT_EQ(to_string(logical_not(lt(i, j))), "!(i < j)");
  EXPECT_EQ(to_string(select(lt(i, 4), i, j)), "select(i < 4, i, j)");
  EXPECT_EQ(to_string(bool_imm(true)), "true");
}

TEST(Printer, FloatsCallsAndCasts) {
  Var x = var("x", kNoLowerBound, kNoUpperBound, DType::kFloat32);
  EXPECT_EQ(to_string(x * float_imm(0.5) + float_imm(1.0)), "x * 0.5 + 1.0");
  EXPECT_EQ(to_string(float_imm(0.1)), "0.1");
  EXPECT_EQ(to_string(float_imm(1e-20)), "1e-20");
  EXPECT_EQ(to_string(float_imm(0.1, DType::kFloat64)), "float64(0.1)");
  EXPECT_EQ(to_string(exp(x)), "exp(x)");
  EXPECT_EQ(to_string(call(CallOp::kPow, {x, float_imm(2.0)})), "pow(x, 2.0)");
  EXPECT_EQ(to_string(cast(DType::kFloat16, x)), "float16(x)");
  EXPECT_EQ(to_string(div(x, x + float_imm(1.0))), "x / (x + 1.0)");
  EXPECT_EQ(to_string(float_imm(-2.5) * x), "-2.5 * x");
}

TEST(Printer, TensorDagProducersFirstEachOnce) {
  Tensor A = placeholder("A", {int_imm(1024), int_imm(1024)});
  Tensor B = placeholder("B", {int_imm(1024), int_imm(1024)});
  Tensor C = reduce("C", {int_imm(1024), int_imm(1024)}, {int_imm(1024)}, ReduceKind::kSum,
                    [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                      return access(A, {ax[0], r[0]}) * access(B, {r[0], ax[1]});
                    });
  EXPECT_EQ(to_string(C),
            "placeholder A: float32[1024, 1024]\n"
            "placeholder B: float32[1024, 1024]\n"
            "C[i, j] = sum(k: 0..1024) A[i, k] * B[k, j]");
  // D reads C twice; C is printed once, before D.
  Tensor D = compute("D", {int_imm(1024), int_imm(1024)}, [&](const std::vector<Var>& ax) {
    return max(access(C, {ax[0], ax[1]}), float_imm(0.0)) + access(C, {ax[1], ax[0]});
  });
  EXPECT_EQ(to_string(D),
            "placeholder A: float32[1024, 1024]\n"
            "placeholder B: float32[1024, 1024]\n"
            "C[i, j] = sum(k: 0..1024) A[i, k] * B[k, j]\n"
            "D[i, j] = max(C[i, j], 0.0) + C[j, i]");
  Var n = size_var("n", 1, 4096);
  Tensor X = placeholder("X", {n, int_imm(8)});
  Tensor S = reduce("S", {n}, {int_imm(8)}, ReduceKind::kMax,
                    [&](const std::vector<Var>& ax, const std::vector<Var>& r) {
                      return access(X, {ax[0], r[0]});
                    });
  EXPECT_EQ(to_string(S), "placeholder X: float32[n, 8]\nS[i] = max(k: 0..8) X[i, k]");
}

TEST(LoopPrinter, NestsWithIndentation) {
  using loop::ForKind;
  Buffer A = make_buffer("A", DType::kFloat32, {int_imm(1024)});
  Buffer B = make_buffer("B", DType::kFloat32, {int_imm(1024)});
  Var io = var("i_o"), ii = var("i_i"), t = var("t");
  Expr idx = io * 32 + ii;
  loop::Stmt store = loop::make_store(B, idx, load(A, idx) * float_imm(2.0));
  loop::Stmt guarded =
      loop::make_if(lt(idx, 1000), store, loop::make_store(B, idx, float_imm(0.0)));
  loop::Stmt body = loop::make_let(t, idx, guarded);
  loop::Stmt nest =
      loop::make_for(io, int_imm(0), int_imm(32), ForKind::kParallel,
                     loop::make_for(ii, int_imm(0), int_imm(32), ForKind::kVectorized, body));
  EXPECT_EQ(loop::to_string(nest),
            "parallel for i_o in [0, 32):\n"
            "  vectorized for i_i in [0, 32):\n"
            "    let t = i_o * 32 + i_i\n"
            "    if i_o * 32 + i_i < 1000:\n"
            "      B[i_o * 32 + i_i] = A[i_o * 32 + i_i] * 2.0\n"
            "    else:\n"
            "      B[i_o * 32 + i_i] = 0.0");
  Buffer acc = make_buffer("acc", DType::kFloat32, {int_imm(4), int_imm(16)}, MemScope::kRegister);
  Var k = var("k");
  loop::Stmt alloc = loop::make_allocate(
      acc, loop::make_seq({loop::make_store(acc, int_imm(0), float_imm(0.0)),
                           loop::make_for(k, int_imm(4), int_imm(8), ForKind::kSerial,
                                          loop::make_store(acc, k, load(acc, k)))}));
  loop::LoweredFunc f;
  f.name = "kernel";
  f.args = {A, B};
  f.size_vars = {size_var("n")};
  f.body = alloc;
  EXPECT_EQ(loop::to_string(f),
            "func kernel(A: float32[1024], B: float32[1024]; sizes: n):\n"
            "  allocate acc: float32[4, 16] (register)\n"
            "  acc[0] = 0.0\n"
            "  for k in [4, 12):\n"
            "    acc[k] = acc[k]");
  EXPECT_EQ(loop::to_string(loop::make_nop()), "nop");
}

}  // namespace
}  // namespace tessera
