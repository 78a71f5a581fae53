// StmtVisitor and StmtMutator: what the defaults walk, and that unchanged trees come back whole.
#include <gtest/gtest.h>

#include "ir/buffer.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "loop/printer.h"
#include "loop/stmt_functor.h"

namespace tessera::loop {
namespace {

using ir::Expr;
using ir::int_imm;

struct Fixture {
  Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {int_imm(64)});
  Var i = ir::var("i", 0, 7), j = ir::var("j", 0, 7), t = ir::var("t", 0, 63);
  Stmt tree = make_for(i, int_imm(0), int_imm(8), ForKind::kSerial,
                       make_seq({make_let(t, i * 8, make_store(a, t, ir::load(a, t) + Expr(1.0))),
                                 make_if(ir::lt(i, 4), make_prefetch(a, i + 8, 1), make_nop()),
                                 make_for(j, int_imm(0), int_imm(8), ForKind::kUnrolled,
                                          make_store(a, i * 8 + j, Expr(0.0)))}));
};

TEST(StmtFunctor, VisitorSeesEveryStatementsOwnExpressionsInOrder) {
  Fixture fx;
  struct Lister : StmtVisitor {
    std::vector<std::string> seen;
    void visit_expr(const Expr& e) override { seen.push_back(ir::to_string(e)); }
  } lister;
  lister.visit(fx.tree);
  EXPECT_EQ(lister.seen, (std::vector<std::string>{"0", "8", "i * 8", "t", "a[t] + 1.0", "i < 4",
                                                   "i + 8", "0", "8", "i * 8 + j", "0.0"}));
}

TEST(StmtFunctor, IdentityMutatorReturnsTheSameTree) {
  Fixture fx;
  StmtMutator m;
  EXPECT_EQ(m.mutate(fx.tree), fx.tree);
}

TEST(StmtFunctor, ExpressionRewriteRebuildsOnlyWhatChanged) {
  Fixture fx;
  // Renames buffer index variable j to 2*j everywhere an expression mentions it.
  struct Doubler : StmtMutator {
    Var j;
    Expr mutate_expr(const Expr& e) override {
      ir::VarMap m{{j.get(), j * 2}};
      return ir::substitute(e, m);
    }
  } doubler;
  doubler.j = fx.j;
  Stmt out = doubler.mutate(fx.tree);
  EXPECT_EQ(to_string(out),
            "for i in [0, 8):\n"
            "  let t = i * 8\n"
            "  a[t] = a[t] + 1.0\n"
            "  if i < 4:\n"
            "    prefetch_l1 a[i + 8]\n"
            "  else:\n"
            "    nop\n"
            "  unrolled for j in [0, 8):\n"
            "    a[i * 8 + j * 2] = 0.0");
  // The let and the if did not mention j: they are the very same nodes.
  EXPECT_EQ(out->body->seq[0], fx.tree->body->seq[0]);
  EXPECT_EQ(out->body->seq[1], fx.tree->body->seq[1]);
  EXPECT_NE(out->body->seq[2], fx.tree->body->seq[2]);
}

TEST(StmtFunctor, SequencesDropStatementsThatBecameNops) {
  Fixture fx;
  struct DropPrefetch : StmtMutator {
    Stmt mutate_prefetch(const Stmt&) override { return make_nop(); }
  } drop;
  Stmt out = drop.mutate(fx.tree);
  EXPECT_EQ(out->body->seq[1]->then_case->kind, StmtKind::kNop);
  struct DropIf : StmtMutator {
    Stmt mutate_if(const Stmt&) override { return make_nop(); }
  } drop_if;
  EXPECT_EQ(drop_if.mutate(fx.tree)->body->seq.size(), 2u);
}

TEST(StmtFunctor, OwnExpressionsExcludeChildren) {
  Fixture fx;
  std::vector<std::string> own;
  for_each_own_expr(fx.tree, [&](const Expr& e) { own.push_back(ir::to_string(e)); });
  EXPECT_EQ(own, (std::vector<std::string>{"0", "8"}));
}

}  // namespace
}  // namespace tessera::loop
