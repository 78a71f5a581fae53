// Variable bounds implied by a branch condition (select arms, loop-IR ifs).
#include "ir/simplify_impl.h"

namespace tessera::ir {

namespace {

__int128 floor_div128(__int128 a, __int128 b) {
  __int128 q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool fits(__int128 v) {
  return v > static_cast<__int128>(kNoLowerBound) && v < static_cast<__int128>(kNoUpperBound);
}

class Refiner {
 public:
  Refiner(const std::function<ConstIntBound(const ExprNode*)>& lookup, BoundMap* out)
      : lookup_(lookup), out_(out) {}

  bool changed() const { return changed_; }

  void run(const Expr& cond, bool holds) {
    switch (cond->kind) {
      case ExprKind::kNot:
        run(cond->operands[0], !holds);
        return;
      case ExprKind::kAnd:
        if (holds) {
          run(cond->operands[0], true);
          run(cond->operands[1], true);
        }
        return;
      case ExprKind::kOr:
        if (!holds) {
          run(cond->operands[0], false);
          run(cond->operands[1], false);
        }
        return;
      case ExprKind::kVar:
        if (cond->dtype == DType::kBool) narrow(cond.get(), bound_point(holds ? 1 : 0));
        return;
      default:
        break;
    }
    if (is_comparison(cond->kind) && is_int(cond->operands[0]->dtype)) {
      compare(cond->kind, cond->operands[0], cond->operands[1], holds);
    }
  }

 private:
  ConstIntBound current(const ExprNode* v) const {
    auto it = out_->find(v);
    return it != out_->end() ? it->second : lookup_(v);
  }

  void narrow(const ExprNode* v, const ConstIntBound& b) {
    ConstIntBound cur = current(v);
    ConstIntBound n = bound_intersect(cur, b);
    bool had = out_->count(v) != 0;
    if (n.lo != cur.lo || n.hi != cur.hi) changed_ = true;
    if (had || n.lo != cur.lo || n.hi != cur.hi) (*out_)[v] = n;
  }

  void compare(ExprKind kind, Expr a, Expr b, bool holds) {
    if (!holds) {
      switch (kind) {
        case ExprKind::kLT:
          kind = ExprKind::kGE;
          break;
        case ExprKind::kLE:
          kind = ExprKind::kGT;
          break;
        case ExprKind::kGT:
          kind = ExprKind::kLE;
          break;
        case ExprKind::kGE:
          kind = ExprKind::kLT;
          break;
        case ExprKind::kEQ:
          kind = ExprKind::kNE;
          break;
        default:
          kind = ExprKind::kEQ;
          break;
      }
    }
    if (kind == ExprKind::kGT || kind == ExprKind::kGE) {
      std::swap(a, b);
      kind = kind == ExprKind::kGT ? ExprKind::kLT : ExprKind::kLE;
    }
    LinearForm d = linear_add(to_linear(a), to_linear(b), -1);
    if (d.invalid || d.terms.size() != 1 || d.terms[0].atoms.size() != 1) return;
    const Expr& x = d.terms[0].atoms[0];
    if (x->kind != ExprKind::kVar) return;
    const __int128 k = d.terms[0].coef;
    __int128 m = d.constant;
    if (kind == ExprKind::kLE) m -= 1;  // k*x + m <= 0  <=>  k*x + m - 1 < 0
    if (kind == ExprKind::kLT || kind == ExprKind::kLE) {
      if (k > 0) {  // x < -m / k  <=>  x <= floor((-m - 1) / k)
        __int128 hi = floor_div128(-m - 1, k);
        if (fits(hi)) narrow(x.get(), ConstIntBound{kNoLowerBound, static_cast<int64_t>(hi)});
      } else {  // |k|*x > m  <=>  x >= floor(m / |k|) + 1
        __int128 lo = floor_div128(m, -k) + 1;
        if (fits(lo)) narrow(x.get(), ConstIntBound{static_cast<int64_t>(lo), kNoUpperBound});
      }
      return;
    }
    // k*x + m == 0 (or != 0)
    bool integral = (-m) % k == 0;
    __int128 v = integral ? (-m) / k : 0;
    if (kind == ExprKind::kEQ) {
      if (!integral) {
        narrow(x.get(), ConstIntBound{1, 0});  // no solution: the branch is unreachable
      } else if (fits(v)) {
        narrow(x.get(), bound_point(static_cast<int64_t>(v)));
      }
      return;
    }
    if (!integral || !fits(v)) return;
    // x != v only trims an end of the range.
    ConstIntBound cur = current(x.get());
    if (cur.lo == v && cur.lo < cur.hi) narrow(x.get(), ConstIntBound{cur.lo + 1, kNoUpperBound});
    if (cur.hi == v && cur.lo < cur.hi) narrow(x.get(), ConstIntBound{kNoLowerBound, cur.hi - 1});
  }

  const std::function<ConstIntBound(const ExprNode*)>& lookup_;
  BoundMap* out_;
  bool changed_ = false;
};

}  // namespace

bool refine_bounds_with(const Expr& cond, bool holds,
                        const std::function<ConstIntBound(const ExprNode*)>& lookup,
                        BoundMap* out) {
  Refiner r(lookup, out);
  r.run(cond, holds);
  return r.changed();
}

bool refine_bounds(const Expr& cond, bool holds, BoundMap* bounds) {
  BoundAnalyzer own(nullptr);
  return refine_bounds_with(
      cond, holds, [&own](const ExprNode* v) { return own.var_bound(v); }, bounds);
}

}  // namespace tessera::ir
