// unroll_loops: before/after loop IR.
#include <gtest/gtest.h>

#include "ir/buffer.h"
#include "loop/printer.h"
#include "loop/unroll.h"

namespace tessera::loop {
namespace {

using ir::Expr;
using ir::int_imm;

Buffer buf(const std::string& name, int64_t n) {
  return ir::make_buffer(name, ir::DType::kFloat32, {int_imm(n)});
}

std::string unrolled(const Stmt& s, std::vector<std::string>* notes = nullptr) {
  std::vector<std::string> local;
  return to_string(unroll_loops(s, notes ? notes : &local));
}

TEST(PassUnroll, ConstantExtentBecomesStraightLineCode) {
  Buffer a = buf("a", 8), b = buf("b", 8);
  Var i = ir::var("i", 0, 3);
  Stmt s = make_for(i, int_imm(0), int_imm(3), ForKind::kUnrolled,
                    make_store(a, i * 2 + 1, ir::load(b, i) * Expr(2.0)));
  EXPECT_EQ(to_string(s),
            "unrolled for i in [0, 3):\n"
            "  a[i * 2 + 1] = b[i] * 2.0");
  // Index arithmetic of each copy folds to constants.
  EXPECT_EQ(unrolled(s),
            "a[1] = b[0] * 2.0\n"
            "a[3] = b[1] * 2.0\n"
            "a[5] = b[2] * 2.0");
}

TEST(PassUnroll, NestedLoopsAndAVariableMin) {
  Buffer a = buf("a", 64);
  Var base = ir::var("base", 0, 32), r = ir::var("r", 0, 1), v = ir::var("v", 0, 15);
  Var j = ir::var("j", 0, 7);
  // Inner loops keep their kinds; the unrolled variable becomes min + i.
  Stmt s =
      make_for(j, int_imm(0), int_imm(8), ForKind::kSerial,
               make_for(r, base, int_imm(2), ForKind::kUnrolled,
                        make_for(v, int_imm(0), int_imm(16), ForKind::kVectorized,
                                 make_store(a, r * 16 + v, ir::load(a, r * 16 + v) + Expr(1.0)))));
  EXPECT_EQ(unrolled(s),
            "for j in [0, 8):\n"
            "  vectorized for v in [0, 16):\n"
            "    a[base * 16 + v] = a[base * 16 + v] + 1.0\n"
            "  vectorized for v in [0, 16):\n"
            "    a[(base + 1) * 16 + v] = a[(base + 1) * 16 + v] + 1.0");
}

TEST(PassUnroll, AnInnerExtentFixedByAnOuterCopyIsUnrolledToo) {
  Buffer a = buf("a", 8);
  Var i = ir::var("i", 0, 2), j = ir::var("j", 0, 2);
  Stmt s =
      make_for(i, int_imm(0), int_imm(3), ForKind::kUnrolled,
               make_for(j, int_imm(0), i, ForKind::kUnrolled, make_store(a, i * 3 + j, Expr(0.0))));
  std::vector<std::string> notes;
  EXPECT_EQ(unrolled(s, &notes),
            "a[3] = 0.0\n"
            "a[6] = 0.0\n"
            "a[7] = 0.0");
  EXPECT_TRUE(notes.empty());
}

TEST(PassUnroll, LongOrSymbolicLoopsStaySerialLoopsWithANote) {
  Buffer a = buf("a", 1024);
  Var n = ir::size_var("n", 0, 1024), i = ir::var("i", 0, 1023), k = ir::var("k", 0, 1023);
  Stmt s = make_seq({make_for(i, int_imm(0), int_imm(kMaxFullUnroll + 1), ForKind::kUnrolled,
                              make_store(a, i, Expr(0.0))),
                     make_for(k, int_imm(0), n, ForKind::kUnrolled, make_store(a, k, Expr(1.0)))});
  std::vector<std::string> notes;
  EXPECT_EQ(unrolled(s, &notes),
            "for i in [0, 513):\n"
            "  a[i] = 0.0\n"
            "for k in [0, n):\n"
            "  a[k] = 1.0");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "unrolled loop i kept as a loop: extent above 512");
  EXPECT_EQ(notes[1], "unrolled loop k kept as a loop: extent is not a constant");
}

TEST(PassUnroll, CopiesShareWhatDoesNotMentionTheVariable) {
  Buffer a = buf("a", 8), b = buf("b", 8);
  Var i = ir::var("i", 0, 1);
  Expr invariant = ir::load(b, int_imm(7)) * Expr(3.0);
  Stmt s = make_for(i, int_imm(0), int_imm(2), ForKind::kUnrolled, make_store(a, i, invariant));
  std::vector<std::string> notes;
  Stmt out = unroll_loops(s, &notes);
  ASSERT_EQ(out->kind, StmtKind::kSeq);
  ASSERT_EQ(out->seq.size(), 2u);
  EXPECT_TRUE(out->seq[0]->value.same_as(invariant));
  EXPECT_TRUE(out->seq[1]->value.same_as(invariant));
  // Nothing to unroll: the same tree comes back.
  Stmt plain = make_store(a, int_imm(0), invariant);
  EXPECT_EQ(unroll_loops(plain, &notes), plain);
}

TEST(PassUnroll, ARebindingOfTheVariableInsideIsNotReplaced) {
  Buffer a = buf("a", 8);
  Var i = ir::var("i", 0, 7);
  Stmt s = make_for(i, int_imm(0), int_imm(2), ForKind::kUnrolled,
                    make_seq({make_store(a, i, Expr(1.0)),
                              make_let(i, int_imm(5), make_store(a, i, Expr(2.0)))}));
  EXPECT_EQ(unrolled(s),
            "a[0] = 1.0\n"
            "let i = 5\n"
            "a[i] = 2.0\n"
            "a[1] = 1.0\n"
            "let i = 5\n"
            "a[i] = 2.0");
}

}  // namespace
}  // namespace tessera::loop
