#pragma once
// Simplifier for index arithmetic (affine expressions with floordiv/floormod, min/max, select),
// driven by constant bounds of variables. ALT layouts and DietCode padding produce index maps like
// (i*16 + j) / 16 and (i*16 + j) % 16 that must collapse back to i and j.
#include <cstdint>
#include <unordered_map>

#include "ir/expr.h"

namespace tessera::ir {

// Inclusive constant bounds; kNoLowerBound / kNoUpperBound mean unbounded.
struct ConstIntBound {
  int64_t lo = kNoLowerBound;
  int64_t hi = kNoUpperBound;
};

// Extra bounds for variables (e.g. loop iterators inside a tile), overriding the var's own lo/hi.
using BoundMap = std::unordered_map<const ExprNode*, ConstIntBound>;

// Constant bounds of an integer expression, using variable bounds.
ConstIntBound const_int_bound(const Expr& e, const BoundMap* extra = nullptr);

// Simplified, equivalent expression (for all variable values within their bounds).
Expr simplify(const Expr& e, const BoundMap* extra = nullptr);

// True if `cond` (a boolean expression) can be proven true for all variable values in bounds.
bool can_prove(const Expr& cond, const BoundMap* extra = nullptr);

// Narrows `bounds` with what `cond == holds` implies for single variables: a comparison of one
// variable with a constant, also after moving terms (2*x + 1 < 9 gives x <= 3), equalities,
// conjunctions (when they hold) and disjunctions (when they fail). Variables missing from
// `bounds` start from their own lo/hi. Used for select branches and the branches of loop-IR ifs.
// Returns true if any bound changed (an empty range [lo > hi] means the branch is unreachable).
bool refine_bounds(const Expr& cond, bool holds, BoundMap* bounds);

}  // namespace tessera::ir
