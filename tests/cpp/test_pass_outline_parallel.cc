// outline_parallel_loops: before/after loop IR.
#include <gtest/gtest.h>

#include <vector>

#include "ir/buffer.h"
#include "loop/interpreter.h"
#include "loop/outline_parallel.h"
#include "loop/printer.h"

namespace tessera::loop {
namespace {

using ir::Expr;
using ir::int_imm;

TEST(PassOutlineParallel, BodyMovesOutWithItsCaptures) {
  Var n = ir::size_var("n", 1, 1024), scale = ir::var("scale", 0, 100);
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {n});
  Buffer b = ir::make_buffer("b", ir::DType::kFloat32, {n});
  Buffer tmp = ir::make_buffer("tmp", ir::DType::kFloat32, {int_imm(1)}, ir::MemScope::kRegister);
  Var i = ir::var("i", 0, 1023), t = ir::var("t", 0, 1023);
  LoweredFunc f;
  f.name = "k";
  f.args = {a, b};
  f.size_vars = {n};
  // Captured: b (read), a (written), scale (an enclosing let), n (a size); not tmp, which the
  // body allocates itself, nor t, which it binds.
  f.body = make_let(
      scale, int_imm(3),
      make_for(i, int_imm(0), n, ForKind::kParallel,
               make_allocate(tmp, make_seq({make_store(tmp, int_imm(0), ir::load(b, i)),
                                            make_let(t, ir::min(i + scale, n - 1),
                                                     make_store(a, t, ir::load(tmp, 0)))}))));
  LoweredFunc g = outline_parallel_loops(f);
  EXPECT_EQ(to_string(g),
            "func k(a: float32[n], b: float32[n]; sizes: n):\n"
            "  let scale = 3\n"
            "  parallel for i in [0, n): call par0(b, a; scale, n)\n"
            "outlined par0(i; b, a; scale, n):\n"
            "  allocate tmp: float32[1] (register)\n"
            "  tmp[0] = b[i]\n"
            "  let t = min(i + scale, n - 1)\n"
            "  a[t] = tmp[0]");
  ASSERT_EQ(g.outlined.size(), 1u);
  EXPECT_TRUE(g.notes.empty());

  // Same results as the loop it replaces (the interpreter runs parallel calls in order).
  std::vector<float> av(8, 0.0f), bv(8), av2(8, 0.0f);
  for (int x = 0; x < 8; ++x) bv[x] = static_cast<float>(x + 1);
  interpret(f, {av.data(), bv.data()}, {8});
  interpret(g, {av2.data(), bv.data()}, {8});
  EXPECT_EQ(av, av2);
}

TEST(PassOutlineParallel, NestedParallelLoopsRunSerially) {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(64)});
  Var i = ir::var("i", 0, 7), j = ir::var("j", 0, 7), k = ir::var("k", 0, 63);
  LoweredFunc f;
  f.name = "nest";
  f.args = {a};
  f.body = make_seq({make_for(i, int_imm(0), int_imm(8), ForKind::kParallel,
                              make_for(j, int_imm(0), int_imm(8), ForKind::kParallel,
                                       make_store(a, i * 8 + j, Expr(1.0)))),
                     make_for(k, int_imm(0), int_imm(64), ForKind::kParallel,
                              make_store(a, k, ir::load(a, k) * Expr(2.0)))});
  LoweredFunc g = outline_parallel_loops(f);
  EXPECT_EQ(to_string(g),
            "func nest(a: float32[64]):\n"
            "  parallel for i in [0, 8): call par0(a)\n"
            "  parallel for k in [0, 64): call par1(a)\n"
            "outlined par0(i; a):\n"
            "  for j in [0, 8):\n"
            "    a[i * 8 + j] = 1.0\n"
            "outlined par1(k; a):\n"
            "  a[k] = a[k] * 2.0");
  ASSERT_EQ(g.notes.size(), 1u);
  EXPECT_EQ(g.notes[0], "parallel loop j runs serially (nested in a parallel loop)");
}

TEST(PassOutlineParallel, WithoutParallelLoopsNothingChanges) {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(4)});
  Var i = ir::var("i", 0, 3);
  LoweredFunc f;
  f.name = "serial";
  f.args = {a};
  f.body = make_for(i, int_imm(0), int_imm(4), ForKind::kSerial, make_store(a, i, Expr(0.0)));
  LoweredFunc g = outline_parallel_loops(f);
  EXPECT_EQ(g.body, f.body);
  EXPECT_TRUE(g.outlined.empty());
}

}  // namespace
}  // namespace tessera::loop
