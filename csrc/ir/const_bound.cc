#include "ir/const_bound.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace tessera::ir {

namespace {

constexpr int64_t kNegInf = kNoLowerBound;
constexpr int64_t kPosInf = kNoUpperBound;

bool is_inf(int64_t v) { return v == kNegInf || v == kPosInf; }

// Saturation is sound in both directions because the saturated values are the infinity
// sentinels: a lower bound that underflows becomes -inf, an upper bound that overflows +inf,
// and a bound that overflows towards the inside becomes an (even looser) extreme value.
int64_t saturate(__int128 v) {
  if (v >= static_cast<__int128>(kPosInf)) return kPosInf;
  if (v <= static_cast<__int128>(kNegInf)) return kNegInf;
  return static_cast<int64_t>(v);
}

// Extended addition; `if_undefined` is returned for -inf + +inf (only possible for empty
// intervals; callers pass the conservative infinity of the bound they compute).
int64_t ext_add(int64_t a, int64_t b, int64_t if_undefined) {
  bool a_inf = is_inf(a), b_inf = is_inf(b);
  if (a_inf && b_inf) return a == b ? a : if_undefined;
  if (a_inf) return a;
  if (b_inf) return b;
  return saturate(static_cast<__int128>(a) + b);
}

int sign(int64_t v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }

int64_t ext_mul(int64_t a, int64_t b) {
  // 0 * inf = 0: infinities stand for "some large finite value", never a real infinity.
  if (a == 0 || b == 0) return 0;
  if (is_inf(a) || is_inf(b)) return sign(a) * sign(b) > 0 ? kPosInf : kNegInf;
  return saturate(static_cast<__int128>(a) * b);
}

int64_t ext_neg(int64_t a) {
  if (a == kNegInf) return kPosInf;
  if (a == kPosInf) return kNegInf;
  return -a;
}

int64_t floordiv_exact(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// floor(a / b) for extended a and finite non-zero b, or finite a and infinite b (the limit,
// which is attained for large enough finite divisors).
int64_t ext_floordiv(int64_t a, int64_t b) {
  if (is_inf(b)) {
    if (b == kPosInf) return a >= 0 ? 0 : -1;
    return a > 0 ? -1 : 0;
  }
  if (is_inf(a)) return sign(a) * sign(b) > 0 ? kPosInf : kNegInf;
  if (a == kNegInf + 1 && b == -1) return kPosInf;  // the one finite overflow
  return floordiv_exact(a, b);
}

// Removes 0 from a divisor range; division by zero is an error, not a value.
bool exclude_zero(ConstIntBound* b) {
  if (b->lo == 0 && b->hi == 0) return false;
  if (b->lo == 0) b->lo = 1;
  if (b->hi == 0) b->hi = -1;
  return true;
}

uint64_t magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

}  // namespace

ConstIntBound bound_everything() { return ConstIntBound{kNegInf, kPosInf}; }
ConstIntBound bound_point(int64_t v) { return ConstIntBound{v, v}; }

ConstIntBound bound_add(const ConstIntBound& a, const ConstIntBound& b) {
  return ConstIntBound{ext_add(a.lo, b.lo, kNegInf), ext_add(a.hi, b.hi, kPosInf)};
}

ConstIntBound bound_neg(const ConstIntBound& a) {
  return ConstIntBound{ext_neg(a.hi), ext_neg(a.lo)};
}

ConstIntBound bound_mul(const ConstIntBound& a, const ConstIntBound& b) {
  int64_t c[4] = {ext_mul(a.lo, b.lo), ext_mul(a.lo, b.hi), ext_mul(a.hi, b.lo),
                  ext_mul(a.hi, b.hi)};
  return ConstIntBound{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

ConstIntBound bound_scale(const ConstIntBound& a, int64_t k) {
  return bound_mul(a, bound_point(k));
}

ConstIntBound bound_floordiv(const ConstIntBound& a, const ConstIntBound& divisor) {
  ConstIntBound b = divisor;
  if (!exclude_zero(&b)) return bound_everything();
  if (b.lo < 0 && b.hi > 0) {
    // |b| >= 1 implies |floor(a / b)| <= |a|.
    if (is_inf(a.lo) || is_inf(a.hi)) return bound_everything();
    uint64_t m = std::max(magnitude(a.lo), magnitude(a.hi));
    if (m >= static_cast<uint64_t>(kPosInf)) return bound_everything();
    return ConstIntBound{-static_cast<int64_t>(m), static_cast<int64_t>(m)};
  }
  // The quotient is monotone in each argument on a divisor range of one sign, so the extremes
  // sit at the corners. Both arguments infinite at once has no meaningful corner value.
  if ((is_inf(a.lo) || is_inf(a.hi)) && (is_inf(b.lo) || is_inf(b.hi))) {
    return bound_everything();
  }
  int64_t c[4] = {ext_floordiv(a.lo, b.lo), ext_floordiv(a.lo, b.hi), ext_floordiv(a.hi, b.lo),
                  ext_floordiv(a.hi, b.hi)};
  return ConstIntBound{*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

ConstIntBound bound_floormod(const ConstIntBound& a, const ConstIntBound& divisor) {
  ConstIntBound b = divisor;
  if (!exclude_zero(&b)) return bound_everything();
  if (b.lo > 0) {
    // A constant divisor and a numerator within one period: the result is a shifted copy.
    if (b.lo == b.hi && !is_inf(a.lo) && !is_inf(a.hi)) {
      int64_t k = floordiv_exact(a.lo, b.lo);
      if (floordiv_exact(a.hi, b.lo) == k) {
        int64_t shift = ext_mul(k, b.lo);
        if (!is_inf(shift)) return ConstIntBound{a.lo - shift, a.hi - shift};
      }
    }
    if (a.lo >= 0 && !is_inf(a.hi) && a.hi < b.lo) return a;  // the numerator is its own rest
    int64_t hi = is_inf(b.hi) ? kPosInf : b.hi - 1;
    if (a.lo >= 0) hi = std::min(hi, a.hi);
    return ConstIntBound{0, hi};
  }
  if (b.hi < 0) {
    int64_t lo = is_inf(b.lo) ? kNegInf : b.lo + 1;
    if (a.hi <= 0) lo = std::max(lo, a.lo);
    return ConstIntBound{lo, 0};
  }
  if (is_inf(b.lo) || is_inf(b.hi)) return bound_everything();
  int64_t m = static_cast<int64_t>(std::max(magnitude(b.lo), magnitude(b.hi))) - 1;
  return ConstIntBound{-m, m};
}

ConstIntBound bound_union(const ConstIntBound& a, const ConstIntBound& b) {
  return ConstIntBound{std::min(a.lo, b.lo), std::max(a.hi, b.hi)};
}

ConstIntBound bound_intersect(const ConstIntBound& a, const ConstIntBound& b) {
  return ConstIntBound{std::max(a.lo, b.lo), std::min(a.hi, b.hi)};
}

ConstIntBound bound_of_dtype(DType t) {
  switch (t) {
    case DType::kBool:
      return ConstIntBound{0, 1};
    case DType::kInt32:
      return ConstIntBound{std::numeric_limits<int32_t>::min(),
                           std::numeric_limits<int32_t>::max()};
    default:
      return bound_everything();
  }
}

ConstIntBound BoundAnalyzer::var_bound(const ExprNode* v) const {
  ConstIntBound b{v->lo, v->hi};
  if (overlay_) {
    auto it = overlay_->find(v);
    if (it != overlay_->end()) return bound_intersect(it->second, bound_of_dtype(v->dtype));
  }
  if (extra_) {
    auto it = extra_->find(v);
    if (it != extra_->end()) b = it->second;
  }
  return bound_intersect(b, bound_of_dtype(v->dtype));
}

ConstIntBound BoundAnalyzer::bound(const Expr& e) {
  if (e->kind == ExprKind::kIntImm) return bound_point(e->int_value);
  if (e->kind == ExprKind::kVar) {
    if (!is_int(e->dtype) && e->dtype != DType::kBool) return bound_everything();
    return var_bound(e.get());
  }
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second.second;
  ConstIntBound b = compute(e);
  memo_.emplace(e.get(), std::make_pair(e, b));
  return b;
}

ConstIntBound BoundAnalyzer::bound_monomial(const std::vector<Expr>& atoms) {
  ConstIntBound b = bound(atoms[0]);
  for (size_t i = 1; i < atoms.size(); ++i) b = bound_mul(b, bound(atoms[i]));
  return b;
}

ConstIntBound BoundAnalyzer::bound_linear(const LinearForm& f) {
  ConstIntBound acc = bound_point(f.constant);
  for (const LinearTerm& t : f.terms) {
    acc = bound_add(acc, bound_scale(bound_monomial(t.atoms), t.coef));
  }
  return acc;
}

ConstIntBound BoundAnalyzer::compute(const Expr& e) {
  const ExprNode& n = *e;
  const bool int_valued = is_int(n.dtype) || n.dtype == DType::kBool;
  switch (n.kind) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul: {
      if (!int_valued) return bound_everything();
      // Summing over the flattened form cancels repeated terms (i*16 + j - i*16) that plain
      // interval arithmetic would count twice. Products are not distributed: duplicating a
      // variable loosens interval products.
      LinearParseOptions opts;
      opts.distribute = false;
      opts.max_nodes = 256;
      LinearForm f = to_linear(e, opts);
      bool self_atom = f.terms.size() == 1 && f.constant == 0 && f.terms[0].coef == 1 &&
                       f.terms[0].atoms.size() == 1 && f.terms[0].atoms[0].same_as(e);
      if (!f.invalid && !self_atom) return bound_linear(f);
      ConstIntBound a = bound(n.operands[0]);
      ConstIntBound b = bound(n.operands[1]);
      if (n.kind == ExprKind::kAdd) return bound_add(a, b);
      if (n.kind == ExprKind::kSub) return bound_add(a, bound_neg(b));
      return bound_mul(a, b);
    }
    case ExprKind::kFloorDiv:
      if (!int_valued) return bound_everything();
      return bound_floordiv(bound(n.operands[0]), bound(n.operands[1]));
    case ExprKind::kFloorMod:
      if (!int_valued) return bound_everything();
      return bound_floormod(bound(n.operands[0]), bound(n.operands[1]));
    case ExprKind::kMin:
    case ExprKind::kMax: {
      if (!int_valued) return bound_everything();
      ConstIntBound a = bound(n.operands[0]);
      ConstIntBound b = bound(n.operands[1]);
      if (n.kind == ExprKind::kMin) {
        return ConstIntBound{std::min(a.lo, b.lo), std::min(a.hi, b.hi)};
      }
      return ConstIntBound{std::max(a.lo, b.lo), std::max(a.hi, b.hi)};
    }
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kNot:
      return ConstIntBound{0, 1};
    case ExprKind::kSelect:
      if (!int_valued) return bound_everything();
      return bound_union(bound(n.operands[1]), bound(n.operands[2]));
    case ExprKind::kCast: {
      const Expr& v = n.operands[0];
      if (n.dtype == DType::kBool) return ConstIntBound{0, 1};
      if (!is_int(n.dtype)) return bound_everything();
      if (is_float(v->dtype)) return bound_of_dtype(n.dtype);
      ConstIntBound s = bound(v);
      ConstIntBound range = bound_of_dtype(n.dtype);
      // A narrowing cast wraps around, so the source bound only survives if it fits.
      if (s.lo >= range.lo && s.hi <= range.hi) return s;
      return range;
    }
    default:
      break;
  }
  if (!int_valued) return bound_everything();
  return bound_of_dtype(n.dtype);  // loads, accesses: anything the type can hold
}

ConstIntBound const_int_bound(const Expr& e, const BoundMap* extra) {
  BoundAnalyzer a(extra);
  return a.bound(e);
}

}  // namespace tessera::ir
