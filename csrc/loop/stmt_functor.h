#pragma once
// Traversals of loop-IR statements: a visitor and a rebuilding mutator (the statement-side twins
// of ir::visit_expr and ir::ExprMutator). A pass is a small subclass that overrides the hooks of
// the kinds it cares about; every other kind gets the default, which walks into the children.
//
// Each statement kind has one hook. The expressions a statement holds itself (for min and extent,
// let value, if condition, store index and value, prefetch index) go through visit_expr /
// mutate_expr; the variables that for and let bind are not expressions to rewrite and never pass
// through them.
//
// Printers, interpreters and code generators, which must give every kind its own meaning, switch
// over StmtKind instead: there the compiler's -Wswitch check flags a kind someone forgot.
#include <functional>

#include "loop/stmt.h"

namespace tessera::loop {

// Calls `f` on each expression `s` holds itself (not those of its children), in the order the
// statement evaluates them.
void for_each_own_expr(const Stmt& s, const std::function<void(const Expr&)>& f);

class StmtVisitor {
 public:
  virtual ~StmtVisitor() = default;
  // Dispatches on the kind (null statements are ignored).
  virtual void visit(const Stmt& s);

 protected:
  // Defaults: visit the statement's own expressions in evaluation order, then its children.
  virtual void visit_for(const Stmt& s);
  virtual void visit_let(const Stmt& s);
  virtual void visit_if(const Stmt& s);
  virtual void visit_store(const Stmt& s);
  virtual void visit_allocate(const Stmt& s);
  virtual void visit_seq(const Stmt& s);
  virtual void visit_prefetch(const Stmt& s);
  virtual void visit_parallel_call(const Stmt& s);  // the outlined body is not a child
  virtual void visit_nop(const Stmt&) {}
  virtual void visit_barrier(const Stmt&) {}
  // Called on each expression a statement holds; does nothing by default.
  virtual void visit_expr(const Expr&) {}
};

class StmtMutator {
 public:
  virtual ~StmtMutator() = default;
  // Dispatches on the kind (null statements come back null).
  virtual Stmt mutate(const Stmt& s);

 protected:
  // Defaults: rebuild the statement from its mutated expressions and children, returning `s`
  // itself when nothing changed. Sequences are rebuilt with make_seq, so children that became
  // nops disappear and children that became sequences are flattened.
  virtual Stmt mutate_for(const Stmt& s);
  virtual Stmt mutate_let(const Stmt& s);
  virtual Stmt mutate_if(const Stmt& s);
  virtual Stmt mutate_store(const Stmt& s);
  virtual Stmt mutate_allocate(const Stmt& s);
  virtual Stmt mutate_seq(const Stmt& s);
  virtual Stmt mutate_prefetch(const Stmt& s);
  virtual Stmt mutate_parallel_call(const Stmt& s);  // the outlined body is not a child
  virtual Stmt mutate_nop(const Stmt& s) { return s; }
  virtual Stmt mutate_barrier(const Stmt& s) { return s; }
  // Called on each expression a statement holds; identity by default. An undefined expression
  // (a missing else) is never passed.
  virtual Expr mutate_expr(const Expr& e) { return e; }
};

}  // namespace tessera::loop
