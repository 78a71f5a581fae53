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

}  // namespace tessera::ir
