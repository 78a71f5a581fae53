#pragma once
// The rewriting engine behind ir/simplify.h (internal header).
//
// Bottom-up: children are simplified first, then one rule per node kind rewrites the node from
// canonical children. Integer +, -, * go through the polynomial form (linear_form.h); floordiv
// and floormod by constants split that form into a part divisible by the divisor and a rest whose
// bounds decide the result (simplify_divmod.cc). Float arithmetic is only constant-folded.
#include <functional>
#include <unordered_map>
#include <utility>

#include "ir/const_bound.h"
#include "ir/linear_form.h"
#include "ir/simplify.h"

namespace tessera::ir {

// Narrows the bounds in `out` with what `cond == holds` implies (see refine_bounds in simplify.h);
// `lookup` gives a variable's current bound when `out` has none. Returns true if any bound
// changed.
bool refine_bounds_with(const Expr& cond, bool holds,
                        const std::function<ConstIntBound(const ExprNode*)>& lookup, BoundMap* out);

// If term `t` is a single atom `x // c` (kind kFloorDiv) or `x % c` (kFloorMod) with a positive
// constant c, returns c; otherwise 0.
int64_t divmod_atom(const LinearTerm& t, ExprKind kind);
// `f` without its terms i and j (pass the same index twice to drop one term).
LinearForm without_terms(const LinearForm& f, size_t i, size_t j);

class Rewriter {
 public:
  explicit Rewriter(const BoundMap* extra) : analyzer_(extra) {}

  Expr simplify(const Expr& e);
  ConstIntBound bound(const Expr& e) { return analyzer_.bound(e); }

  // Rules; operands are already simplified. Public so the rules can call each other.
  Expr rewrite_linear(const Expr& e);  // int +, -, *
  Expr rewrite_floordiv(const Expr& a, const Expr& b);
  Expr rewrite_floormod(const Expr& a, const Expr& b);
  Expr rewrite_minmax(ExprKind kind, const Expr& a, const Expr& b);
  Expr rewrite_compare(ExprKind kind, const Expr& a, const Expr& b);
  Expr rewrite_not(const Expr& a);
  Expr rewrite_logic(ExprKind kind, const Expr& a, const Expr& b);
  Expr rewrite_float_binary(const Expr& e, const Expr& a, const Expr& b);

  // Canonical expression of a form, after merging (x // c)*c + x % c pairs.
  Expr finish_linear(LinearForm f);
  BoundAnalyzer& analyzer() { return analyzer_; }

 private:
  Expr visit(const Expr& e);
  Expr visit_select(const Expr& e);
  // Simplifies `e` with variable bounds narrowed by knowing `cond == holds`.
  Expr simplify_assuming(const Expr& e, const Expr& cond, bool holds);
  bool merge_divmod_pairs(LinearForm* f);
  // Division rules on a parsed numerator and a positive constant divisor c >= 2.
  Expr floordiv_form(LinearForm f, int64_t c, DType t);
  Expr floormod_form(LinearForm f, int64_t c, DType t);
  // Division by a non-constant single atom with a positive lower bound.
  Expr divmod_by_atom(bool is_div, const Expr& a, const Expr& b);

  BoundAnalyzer analyzer_;
  // Results for nodes of the input; the stored input keeps the key's address alive.
  std::unordered_map<const ExprNode*, std::pair<Expr, Expr>> memo_;
};

}  // namespace tessera::ir
