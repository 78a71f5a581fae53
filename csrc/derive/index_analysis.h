#pragma once
// Index facts the derivation rules prove before they rewrite: affine forms of index
// expressions, bounds of indices, and "this body is 0 here" (a factor reads a zero-padded
// tensor outside its shape).
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "ir/expr.h"
#include "ir/simplify.h"

namespace tessera::derive {

// sum(coef[v] * v) + constant, every term a single variable of degree one.
struct AffineIndex {
  std::vector<std::pair<ir::Var, int64_t>> terms;  // distinct variables, non-zero coefficients
  int64_t constant = 0;

  int64_t coef(const ir::ExprNode* v) const;
};
// The affine form of an integer index, or nullopt when it has products of variables, div, mod
// or other non-affine atoms.
std::optional<AffineIndex> affine_index(const ir::Expr& e);

// Bounds of an index with extra variable bounds (overriding the variables' own).
ir::ConstIntBound index_bound(const ir::Expr& e, const ir::BoundMap* extra = nullptr);

// True when every index of `access` (a kAccess node) lies provably inside the tensor's shape
// for all variable values allowed by the bounds.
bool reads_in_bounds(const ir::Expr& access, const ir::BoundMap* extra = nullptr);
// True when some index of `access` lies provably outside the tensor's shape for all values.
bool reads_out_of_bounds(const ir::Expr& access, const ir::BoundMap* extra = nullptr);

// True when `body` is provably 0 for all variable values within the bounds: it is a product
// (through *, casts and negation) with a factor that reads a tensor whose pad_value is 0
// outside its shape. Assumes finite inputs (0 * inf is not considered), as EinNet does.
bool provably_zero(const ir::Expr& body, const ir::BoundMap* extra = nullptr);

}  // namespace tessera::derive
