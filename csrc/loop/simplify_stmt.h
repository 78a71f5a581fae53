#pragma once
// Loop-IR cleanup after lowering: simplifies every expression with the ranges of the enclosing
// loop and let variables, and removes what provably never runs or runs once.
//  - expressions: ir::simplify with each loop variable bounded by [min, min + extent - 1]
//    (constant envelope of those bounds) and each let variable by the bounds of its value;
//  - if: dropped when the condition is provably true or false (the surviving branch stays);
//    inside a branch, the condition narrows variable bounds (refine_bounds);
//  - for: removed when the extent is provably <= 0, replaced by its body with the variable set
//    to `min` when the extent is provably 1 (GPU-bound loops are kept: they define the launch
//    shape);
//  - let: a constant or variable value is substituted into the body;
//  - statements whose body became empty (nop) disappear.
#include "ir/simplify.h"
#include "loop/stmt.h"

namespace tessera::loop {

Stmt simplify_stmt(const Stmt& s);
// Same, with known bounds of free variables (e.g. size variables at a call site).
Stmt simplify_stmt(const Stmt& s, const ir::BoundMap& bounds);

}  // namespace tessera::loop
