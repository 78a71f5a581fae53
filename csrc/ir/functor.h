#pragma once
// Generic traversal helpers over expressions: a rebuilding mutator, a visitor, substitution.
#include <functional>
#include <unordered_map>

#include "ir/expr.h"

namespace tessera::ir {

// Rebuilds an expression bottom-up. Override `mutate` for the kinds you care about and call
// `mutate_children` for the default. Unchanged subtrees are returned as the same node.
class ExprMutator {
 public:
  virtual ~ExprMutator() = default;
  virtual Expr mutate(const Expr& e) { return mutate_children(e); }

 protected:
  Expr mutate_children(const Expr& e);
};

// Calls `f` on every node, parents before children.
void visit_expr(const Expr& e, const std::function<void(const Expr&)>& f);

// Variable -> replacement map keyed by the variable node.
using VarMap = std::unordered_map<const ExprNode*, Expr>;

// Replaces variables by expressions (no simplification).
Expr substitute(const Expr& e, const VarMap& vmap);

// True if `e` mentions variable `v`.
bool uses_var(const Expr& e, const Var& v);

// Collects free variables in first-visit order (deduplicated).
std::vector<Var> free_vars(const Expr& e);

}  // namespace tessera::ir
