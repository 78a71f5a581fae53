#pragma once
// Canonical polynomial form of integer index expressions, the core data structure of the
// simplifier (internal header; the public API is ir/simplify.h).
//
// An integer expression is viewed as   sum_i coef_i * (atom_i1 * atom_i2 * ...)  +  constant
// where atoms are everything that is not +, -, * or an integer constant (variables, floordiv,
// floormod, min, max, select, loads, ...). Monomials are kept sorted by a total structural order
// (variables by creation id) and merged, so two equivalent sums produce the same form and the
// same printed expression, run after run.
#include <cstdint>
#include <functional>
#include <vector>

#include "ir/expr.h"

namespace tessera::ir {

// Total structural order on expressions. Variables compare by creation id (identity), constants
// by value, compound nodes by kind, dtype and operands. 0 means structurally identical.
int compare_expr(const Expr& a, const Expr& b);
inline bool expr_equal(const Expr& a, const Expr& b) { return compare_expr(a, b) == 0; }

struct LinearTerm {
  int64_t coef = 0;
  std::vector<Expr> atoms;  // non-empty, sorted by compare_expr (repeats allowed: x*x)
};

struct LinearForm {
  DType dtype = kIndexType;
  std::vector<LinearTerm> terms;  // sorted by monomial, distinct monomials, non-zero coefs
  int64_t constant = 0;
  // Set when a coefficient overflowed int64, or a parse ran past its node budget: the form is
  // then meaningless and callers must keep the original expression.
  bool invalid = false;

  bool is_constant() const { return terms.empty(); }
};

LinearForm linear_constant(int64_t c, DType dtype);
LinearForm linear_atom(const Expr& atom);
// a + scale * b.
LinearForm linear_add(const LinearForm& a, const LinearForm& b, int64_t scale = 1);
LinearForm linear_scale(const LinearForm& a, int64_t k);
// Product with distribution over the terms of both sides.
LinearForm linear_mul(const LinearForm& a, const LinearForm& b);
// Sorts terms, merges equal monomials and drops zero coefficients.
void linear_normalize(LinearForm* f);

struct LinearParseOptions {
  // Expand products of two non-constant sums (canonical forms want this; bound analysis does
  // not, because interval arithmetic gets looser when a variable is duplicated).
  bool distribute = true;
  // Largest number of terms a distributed product may produce before it is kept as an atom.
  size_t max_distributed_terms = 64;
  // Node budget for the whole parse (guards against exponential walks of shared DAGs).
  size_t max_nodes = 1 << 16;
  // Applied to every atom before it enters the form (the simplifier passes itself here, so a
  // long sum is flattened once instead of once per nesting level). A mapped atom that turns out
  // to be a sum or product is flattened into the form; non-distributed products are rebuilt
  // from their parsed sides instead of being mapped.
  std::function<Expr(const Expr&)> map_atom;
};

// Parses an integer expression into its polynomial form (no other simplification).
LinearForm to_linear(const Expr& e, const LinearParseOptions& opts = LinearParseOptions());
// Builds an expression from a form: positive terms first, then subtracted negative terms, then
// the constant, e.g. `i*16 + j - k + 3`.
Expr from_linear(const LinearForm& f);
// Expression of one monomial (product of its atoms, without coefficient).
Expr monomial_expr(const std::vector<Expr>& atoms);

// gcd of the term coefficients (0 when there are no terms); always non-negative.
int64_t linear_coef_gcd(const LinearForm& f);

// Overflow-checked helpers shared by the rewriting rules; they return false on overflow.
bool checked_add(int64_t a, int64_t b, int64_t* out);
bool checked_mul(int64_t a, int64_t b, int64_t* out);

}  // namespace tessera::ir
