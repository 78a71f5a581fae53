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

// True if `e` reads memory anywhere: a tensor access or a buffer load. Its integer values are
// then data, which wraps around on overflow, not index arithmetic, which never overflows.
bool reads_memory(const Expr& e);

// Collects free variables in first-visit order (deduplicated).
std::vector<Var> free_vars(const Expr& e);

// Height and node count of `e` written out as a tree: a subexpression shared by several parents
// counts once per use, as it will once inlined or emitted. Both saturate at kTreeSizeLimit.
// `access_extra` (optional) gives what an access node stands for on top of itself (the body of
// a producer that will be inlined there). Iterative, so any input is safe to measure.
struct TreeSize {
  int64_t depth = 0;
  int64_t nodes = 0;
};
constexpr int64_t kTreeSizeLimit = int64_t{1} << 40;
TreeSize tree_size(const Expr& e,
                   const std::function<TreeSize(const ExprNode&)>& access_extra = nullptr);

}  // namespace tessera::ir
