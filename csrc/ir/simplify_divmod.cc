// floordiv / floormod rules of the simplifier.
//
// The central idea: write the numerator as  f = c*Q + R  where Q collects the multiples of the
// divisor c and R has small coefficients (|r| < c). If the bounds of R fit inside one period
// [k*c, k*c + c) then  f // c = Q + k  and  f % c = R - k*c. This is how (i*16 + j) // 16 -> i
// and (i*16 + j) % 16 -> j when 0 <= j < 16, and how (i_o*32 + i_i) // 16 -> i_o*2 + i_i // 16.
#include <limits>
#include <numeric>

#include "ir/eval.h"
#include "ir/functor.h"
#include "ir/simplify_impl.h"

namespace tessera::ir {

namespace {

constexpr int64_t kMinInt64 = std::numeric_limits<int64_t>::min();

// How the residue r of a coefficient a (a = q*c + r) is chosen. No single choice is always best:
// the bounds of R must land in one period, and that depends on where they sit, so all three are
// tried.
enum class Residue { kNonNegative, kSymmetric, kNonPositive };

int64_t residue(int64_t a, int64_t c, Residue mode) {
  int64_t r = floormod_int(a, c);  // [0, c)
  if (r == 0) return 0;
  switch (mode) {
    case Residue::kNonNegative:
      return r;
    case Residue::kSymmetric:
      return r > c / 2 ? r - c : r;
    case Residue::kNonPositive:
      return r - c;
  }
  return r;
}

// f = c * quotient + rest with rest in [0, c) for all variable values, if the bounds show it.
bool resolve_by_bounds(BoundAnalyzer& analyzer, const LinearForm& f, int64_t c,
                       LinearForm* quotient, LinearForm* rest) {
  for (Residue mode : {Residue::kNonNegative, Residue::kSymmetric, Residue::kNonPositive}) {
    LinearForm q = linear_constant(0, f.dtype), r = linear_constant(0, f.dtype);
    for (const LinearTerm& t : f.terms) {
      int64_t rt = residue(t.coef, c, mode);
      // (a - r) / c is exact and |.| <= |a| / c + 1, so only the subtraction needs 128 bits.
      int64_t qt = static_cast<int64_t>((static_cast<__int128>(t.coef) - rt) / c);
      if (qt != 0) q.terms.push_back(LinearTerm{qt, t.atoms});
      if (rt != 0) r.terms.push_back(LinearTerm{rt, t.atoms});
    }
    ConstIntBound br = analyzer.bound_linear(r);
    int64_t lo, hi;
    if (!bound_is_finite(br) || !checked_add(br.lo, f.constant, &lo) ||
        !checked_add(br.hi, f.constant, &hi)) {
      continue;
    }
    int64_t k = floordiv_int(lo, c);
    if (floordiv_int(hi, c) != k) continue;
    q.constant = k;
    int64_t kc;
    if (!checked_mul(k, c, &kc) || !checked_add(f.constant, -kc, &r.constant)) continue;
    *quotient = std::move(q);
    *rest = std::move(r);
    return true;
  }
  return false;
}

}  // namespace

Expr Rewriter::rewrite_floordiv(const Expr& a, const Expr& b) {
  const DType t = a->dtype;
  auto keep = [&] { return make_node(ExprKind::kFloorDiv, t, {a, b}); };
  if (b->kind != ExprKind::kIntImm) {
    return reads_memory(a) || reads_memory(b) ? keep() : divmod_by_atom(true, a, b);
  }
  const int64_t c = b->int_value;
  if (c == 0) return keep();  // division by zero stays visible (it is an error at run time)
  if (a->kind == ExprKind::kIntImm) {
    if (a->int_value == kMinInt64 && c == -1) return keep();
    return int_imm(floordiv_int(a->int_value, c), t);
  }
  if (c == 1) return a;
  if (reads_memory(a)) return keep();  // data wraps around: a sum's terms do not divide apart
  LinearForm f = to_linear(a);
  if (f.invalid) return keep();
  if (c < 0) {
    // floor(a / c) = floor(-a / -c)
    if (c == kMinInt64) return keep();
    LinearForm neg = linear_scale(f, -1);
    if (neg.invalid) return keep();
    return floordiv_form(std::move(neg), -c, t);
  }
  return floordiv_form(std::move(f), c, t);
}

Expr Rewriter::floordiv_form(LinearForm f, int64_t c, DType t) {
  if (f.is_constant()) return int_imm(floordiv_int(f.constant, c), t);
  // (g*y + b) // (g*c') = (y + b // g) // c'   since 0 <= b % g < g cannot cross a multiple of g.
  int64_t g = std::gcd(linear_coef_gcd(f), c);
  if (g > 1) {
    for (LinearTerm& term : f.terms) term.coef /= g;
    f.constant = floordiv_int(f.constant, g);
    c /= g;
    if (c == 1) return finish_linear(std::move(f));
  }
  // (y // d + k) // c  ->  (y + k*d) // (d*c)
  if (f.terms.size() == 1 && f.terms[0].coef == 1) {
    int64_t d = divmod_atom(f.terms[0], ExprKind::kFloorDiv);
    int64_t kd, dc;
    if (d > 0 && checked_mul(f.constant, d, &kd) && checked_mul(d, c, &dc)) {
      LinearForm inner = to_linear(f.terms[0].atoms[0]->operands[0]);
      inner = linear_add(inner, linear_constant(kd, t));
      if (!inner.invalid) return floordiv_form(std::move(inner), dc, t);
    }
  }
  LinearForm q, r;
  if (resolve_by_bounds(analyzer_, f, c, &q, &r)) return finish_linear(std::move(q));
  // Unresolved: still pull out the terms that are exact multiples of c (they make the result
  // shorter), e.g. (i_o*32 + i_i) // 16 -> i_o*2 + i_i // 16.
  LinearForm multiples = linear_constant(0, t), rest = linear_constant(f.constant, t);
  for (const LinearTerm& term : f.terms) {
    if (term.coef % c == 0) {
      multiples.terms.push_back(LinearTerm{term.coef / c, term.atoms});
    } else {
      rest.terms.push_back(term);
    }
  }
  if (multiples.terms.empty()) {
    return make_node(ExprKind::kFloorDiv, t, {from_linear(f), int_imm(c, t)});
  }
  // The rest may match a rule the whole form did not (e.g. the nested division); it has no
  // multiples of c left, so this recursion ends at the next level.
  return finish_linear(linear_add(multiples, to_linear(floordiv_form(std::move(rest), c, t))));
}

Expr Rewriter::rewrite_floormod(const Expr& a, const Expr& b) {
  const DType t = a->dtype;
  auto keep = [&] { return make_node(ExprKind::kFloorMod, t, {a, b}); };
  if (b->kind != ExprKind::kIntImm) {
    return reads_memory(a) || reads_memory(b) ? keep() : divmod_by_atom(false, a, b);
  }
  const int64_t c = b->int_value;
  if (c == 0) return keep();
  if (a->kind == ExprKind::kIntImm) {
    if (c == -1) return int_imm(0, t);
    return int_imm(floormod_int(a->int_value, c), t);
  }
  if (c == 1 || c == -1) return int_imm(0, t);
  if (reads_memory(a)) return keep();  // data wraps around: a sum's terms do not reduce apart
  LinearForm f = to_linear(a);
  if (f.invalid) return keep();
  if (c < 0) {
    // a mod c = -((-a) mod -c)
    if (c == kMinInt64) return keep();
    LinearForm neg = linear_scale(f, -1);
    if (neg.invalid) return keep();
    LinearForm m = to_linear(floormod_form(std::move(neg), -c, t));
    m = linear_scale(m, -1);
    if (m.invalid) return keep();
    return finish_linear(std::move(m));
  }
  return floormod_form(std::move(f), c, t);
}

Expr Rewriter::floormod_form(LinearForm f, int64_t c, DType t) {
  // (y % m) is congruent to y modulo c when c divides m: drop the inner mod.
  for (int round = 0; round < 8; ++round) {
    bool changed = false;
    for (size_t i = 0; i < f.terms.size() && !changed; ++i) {
      int64_t m = divmod_atom(f.terms[i], ExprKind::kFloorMod);
      if (m == 0 || m % c != 0) continue;
      LinearForm g = linear_add(without_terms(f, i, i), to_linear(f.terms[i].atoms[0]->operands[0]),
                                f.terms[i].coef);
      if (!g.invalid) {
        f = std::move(g);
        changed = true;
      }
    }
    if (!changed) break;
  }
  if (f.is_constant()) return int_imm(floormod_int(f.constant, c), t);
  LinearForm q, r;
  if (resolve_by_bounds(analyzer_, f, c, &q, &r)) return finish_linear(std::move(r));
  // Reduce every coefficient modulo c; (g*y + b) % (g*c') = g*((y + b // g) % c') + b % g.
  LinearForm reduced = linear_constant(floormod_int(f.constant, c), t);
  for (const LinearTerm& term : f.terms) {
    int64_t rt = floormod_int(term.coef, c);
    if (rt != 0) reduced.terms.push_back(LinearTerm{rt, term.atoms});
  }
  if (reduced.is_constant()) return int_imm(reduced.constant, t);
  int64_t g = std::gcd(linear_coef_gcd(reduced), c);
  if (g > 1) {
    LinearForm y = reduced;
    for (LinearTerm& term : y.terms) term.coef /= g;
    y.constant = floordiv_int(reduced.constant, g);
    LinearForm inner = to_linear(floormod_form(std::move(y), c / g, t));
    LinearForm out =
        linear_add(linear_scale(inner, g), linear_constant(floormod_int(reduced.constant, g), t));
    if (!out.invalid) return finish_linear(std::move(out));
  }
  // Printed form keeps the sign of each coefficient ((-j) % 16 rather than (j*15) % 16).
  LinearForm shown = linear_constant(f.constant % c, t);
  for (const LinearTerm& term : f.terms) {
    if (term.coef % c != 0) shown.terms.push_back(LinearTerm{term.coef % c, term.atoms});
  }
  return make_node(ExprKind::kFloorMod, t, {from_linear(shown), int_imm(c, t)});
}

Expr Rewriter::divmod_by_atom(bool is_div, const Expr& a, const Expr& b) {
  const DType t = a->dtype;
  const ExprKind kind = is_div ? ExprKind::kFloorDiv : ExprKind::kFloorMod;
  auto keep = [&] { return make_node(kind, t, {a, b}); };
  switch (b->kind) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
    case ExprKind::kIntImm:
      return keep();
    default:
      break;
  }
  ConstIntBound bb = analyzer_.bound(b);
  if (bb.lo < 1) return keep();
  LinearForm f = to_linear(a);
  if (f.invalid) return keep();
  // f = b*Q + R, where Q gathers the monomials that contain the atom b.
  LinearForm q = linear_constant(0, t), r = linear_constant(f.constant, t);
  for (const LinearTerm& term : f.terms) {
    size_t at = term.atoms.size();
    for (size_t i = 0; i < term.atoms.size(); ++i) {
      if (expr_equal(term.atoms[i], b)) {
        at = i;
        break;
      }
    }
    if (at == term.atoms.size()) {
      r.terms.push_back(term);
      continue;
    }
    std::vector<Expr> atoms = term.atoms;
    atoms.erase(atoms.begin() + static_cast<std::ptrdiff_t>(at));
    if (atoms.empty()) {
      if (!checked_add(q.constant, term.coef, &q.constant)) return keep();
    } else {
      q.terms.push_back(LinearTerm{term.coef, std::move(atoms)});
    }
  }
  linear_normalize(&q);
  if (q.invalid) return keep();
  ConstIntBound br = analyzer_.bound_linear(r);
  if (br.lo >= 0 && br.hi < bb.lo) {  // 0 <= R < b
    return is_div ? finish_linear(std::move(q)) : finish_linear(std::move(r));
  }
  if (q.terms.empty() && q.constant == 0) return keep();
  if (r.is_constant() && r.constant == 0) {
    return is_div ? finish_linear(std::move(q)) : int_imm(0, t);
  }
  Expr rest = make_node(kind, t, {from_linear(r), b});
  if (!is_div) return rest;
  return finish_linear(linear_add(q, linear_atom(rest)));
}

}  // namespace tessera::ir
