#pragma once
// Analyses of index expressions inside vectorized loops, shared by vectorisation legalisation
// (which decides whether a body may run lane-wise) and the CPU code generator (which picks a
// vector, scalar or gather/scatter access from the lane stride).
#include <optional>

#include "ir/functor.h"

namespace tessera::loop {

// Exact equality: same structure, same variables (by identity), same buffers (by identity).
// Unlike ir::structural_equal this does not identify renamed variables, which would be unsound
// for dependence tests.
bool exact_equal(const ir::Expr& a, const ir::Expr& b);

// If `e` is affine in `var` with a constant coefficient (e = base + stride*var, base free of
// var), the stride; otherwise nullopt. `defs` maps Let variables to their definitions (already
// expressed in terms of `var` and other free variables); they are looked through.
std::optional<int64_t> lane_stride(const ir::Expr& e, const ir::ExprNode* var,
                                   const ir::VarMap& defs);

// True if `e` mentions `var`, looking through the definitions in `defs`.
bool mentions(const ir::Expr& e, const ir::ExprNode* var, const ir::VarMap& defs);

}  // namespace tessera::loop
