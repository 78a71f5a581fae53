#pragma once
// Constant-interval analysis of integer expressions (internal header; the public entry point is
// const_int_bound in ir/simplify.h).
//
// Intervals are inclusive; kNoLowerBound / kNoUpperBound stand for -inf / +inf. Every operation
// rounds outwards: when a finite result would overflow int64 the bound becomes infinite, so the
// analysis stays sound (never claims a range narrower than the true one).
#include <unordered_map>
#include <utility>

#include "ir/linear_form.h"
#include "ir/simplify.h"

namespace tessera::ir {

inline bool is_finite_lo(int64_t v) { return v != kNoLowerBound; }
inline bool is_finite_hi(int64_t v) { return v != kNoUpperBound; }
inline bool bound_is_finite(const ConstIntBound& b) {
  return is_finite_lo(b.lo) && is_finite_hi(b.hi);
}

ConstIntBound bound_everything();
ConstIntBound bound_point(int64_t v);
ConstIntBound bound_add(const ConstIntBound& a, const ConstIntBound& b);
ConstIntBound bound_neg(const ConstIntBound& a);
ConstIntBound bound_mul(const ConstIntBound& a, const ConstIntBound& b);
ConstIntBound bound_scale(const ConstIntBound& a, int64_t k);
ConstIntBound bound_floordiv(const ConstIntBound& a, const ConstIntBound& b);
ConstIntBound bound_floormod(const ConstIntBound& a, const ConstIntBound& b);
ConstIntBound bound_union(const ConstIntBound& a, const ConstIntBound& b);
ConstIntBound bound_intersect(const ConstIntBound& a, const ConstIntBound& b);
// Full range of values representable in `t` (bool: [0, 1]).
ConstIntBound bound_of_dtype(DType t);

// Memoised interval analysis. Variable bounds come from `overlay` (if set), then `extra`, then
// the variable's own lo/hi.
class BoundAnalyzer {
 public:
  explicit BoundAnalyzer(const BoundMap* extra) : extra_(extra) {}

  ConstIntBound bound(const Expr& e);
  ConstIntBound bound_linear(const LinearForm& f);
  ConstIntBound bound_monomial(const std::vector<Expr>& atoms);
  ConstIntBound var_bound(const ExprNode* v) const;

  // Temporarily tighter variable bounds (branches of a select); the memo is swapped out
  // while they are active because cached results depend on them.
  const BoundMap* overlay() const { return overlay_; }
  void set_overlay(const BoundMap* overlay) {
    overlay_ = overlay;
    memo_.clear();
  }

 private:
  ConstIntBound compute(const Expr& e);

  const BoundMap* extra_;
  const BoundMap* overlay_ = nullptr;
  // The key's node is kept alive by the stored Expr, so addresses cannot be reused.
  std::unordered_map<const ExprNode*, std::pair<Expr, ConstIntBound>> memo_;
};

}  // namespace tessera::ir
