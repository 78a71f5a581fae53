// legalize_vectorized_loops: before/after loop IR.
#include <gtest/gtest.h>

#include "ir/buffer.h"
#include "loop/legalize_vectorize.h"
#include "loop/printer.h"

namespace tessera::loop {
namespace {

using ir::Expr;
using ir::int_imm;

Buffer buf(const std::string& name, int64_t n) {
  return ir::make_buffer(name, ir::DType::kFloat32, {int_imm(n)});
}

Stmt vec(const Var& v, int64_t lanes, Stmt body) {
  return make_for(v, int_imm(0), int_imm(lanes), ForKind::kVectorized, std::move(body));
}

TEST(PassLegalizeVectorize, LaneWiseBodiesStayVectorized) {
  Buffer a = buf("a", 64), b = buf("b", 64);
  Var v = ir::var("v", 0, 15), r = ir::var("r", 0, 3);
  // A unit-stride update, and unrolled rows 16 apart (disjoint lanes).
  Stmt s = make_seq({vec(v, 16, make_store(a, v, ir::load(a, v) + ir::load(b, v))),
                     vec(v, 16,
                         make_for(r, int_imm(0), int_imm(4), ForKind::kUnrolled,
                                  make_store(a, r * 16 + v, ir::load(a, r * 16 + v))))});
  std::vector<std::string> notes;
  EXPECT_EQ(legalize_vectorized_loops(s, &notes), s);  // unchanged: the same tree
  EXPECT_TRUE(notes.empty());
}

TEST(PassLegalizeVectorize, LoopCarriedDependenceBecomesSerial) {
  Buffer a = buf("a", 16), out = buf("out", 17);
  Var i = ir::var("i", 0, 15);
  Stmt s = vec(i, 16, make_store(out, i + 1, ir::load(out, i) + ir::load(a, i)));
  std::vector<std::string> notes;
  EXPECT_EQ(to_string(s),
            "vectorized for i in [0, 16):\n"
            "  out[i + 1] = out[i] + a[i]");
  EXPECT_EQ(to_string(legalize_vectorized_loops(s, &notes)),
            "for i in [0, 16):\n"
            "  out[i + 1] = out[i] + a[i]");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "vectorized loop i runs as a scalar loop: buffer out is written at indices that may "
            "overlap across lanes or be read elsewhere");
}

TEST(PassLegalizeVectorize, OverlappingUnrolledCopiesBecomeSerial) {
  Buffer a = buf("a", 24);
  Var j = ir::var("j", 0, 15), c = ir::var("c", 0, 1);
  // Copies c = 0 and 1 overlap on elements 8..15.
  Stmt s = vec(j, 16,
               make_for(c, int_imm(0), int_imm(2), ForKind::kUnrolled,
                        make_store(a, c * 8 + j, ir::load(a, c * 8 + j) * Expr(2.0))));
  std::vector<std::string> notes;
  Stmt out = legalize_vectorized_loops(s, &notes);
  EXPECT_EQ(out->for_kind, ForKind::kSerial);
  EXPECT_EQ(out->body, s->body);
  EXPECT_EQ(notes.size(), 1u);
}

TEST(PassLegalizeVectorize, ShapesTheCodeGeneratorCannotVectorize) {
  Buffer a = buf("a", 512);
  Var v = ir::var("v", 0, 511), w = ir::var("w", 0, 3), n = ir::size_var("n", 1, 16);
  Buffer tmp = ir::make_buffer("tmp", ir::DType::kFloat32, {int_imm(4)}, ir::MemScope::kRegister);
  std::vector<std::string> notes;
  legalize_vectorized_loops(vec(v, 512, make_store(a, v, Expr(0.0))), &notes);
  legalize_vectorized_loops(vec(v, 1, make_store(a, v, Expr(0.0))), &notes);
  legalize_vectorized_loops(
      make_for(v, int_imm(0), n, ForKind::kVectorized, make_store(a, v, Expr(0.0))), &notes);
  legalize_vectorized_loops(vec(v, 4,
                                make_for(w, int_imm(0), int_imm(4), ForKind::kSerial,
                                         make_store(a, v * 4 + w, Expr(0.0)))),
                            &notes);
  legalize_vectorized_loops(vec(v, 4, make_allocate(tmp, make_store(tmp, v, Expr(0.0)))), &notes);
  ASSERT_EQ(notes.size(), 5u);
  EXPECT_EQ(notes[0], "vectorized loop v runs as a scalar loop: extent 512 outside [2, 256]");
  EXPECT_EQ(notes[1], "vectorized loop v runs as a scalar loop: extent 1 outside [2, 256]");
  EXPECT_EQ(notes[2], "vectorized loop v runs as a scalar loop: extent is not a constant");
  EXPECT_EQ(notes[3],
            "vectorized loop v runs as a scalar loop: a nested loop that is not a constant-extent "
            "unrolled loop");
  EXPECT_EQ(notes[4],
            "vectorized loop v runs as a scalar loop: an allocation inside the vectorized body");
}

TEST(PassLegalizeVectorize, LoopsInsideASerialisedLoopAreLegalisedOnTheirOwn) {
  Buffer a = buf("a", 64);
  Var i = ir::var("i", 0, 3), v = ir::var("v", 0, 15);
  Stmt inner = vec(v, 16, make_store(a, i * 16 + v, Expr(1.0)));
  Stmt s = vec(i, 4, inner);  // the outer loop holds a loop: serial; the inner one is fine
  std::vector<std::string> notes;
  Stmt out = legalize_vectorized_loops(s, &notes);
  EXPECT_EQ(to_string(out),
            "for i in [0, 4):\n"
            "  vectorized for v in [0, 16):\n"
            "    a[i * 16 + v] = 1.0");
  EXPECT_EQ(out->body, inner);
  EXPECT_EQ(notes.size(), 1u);
}

}  // namespace
}  // namespace tessera::loop
