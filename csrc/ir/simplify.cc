// Simplifier driver and the rules for sums, min/max, comparisons, logic, select and casts.
// Division rules live in simplify_divmod.cc, bound refinement in simplify_refine.cc.
#include "ir/simplify.h"

#include <cmath>

#include "ir/functor.h"
#include "ir/simplify_impl.h"

namespace tessera::ir {

namespace {

bool is_true(const Expr& e) { return e->kind == ExprKind::kIntImm && e->int_value != 0; }

// Float constant folding follows what generated code computes: fp32 operands and results are
// rounded to fp32. Half types are left alone (their arithmetic is target specific).
bool foldable_float(const Expr& a, const Expr& b) {
  return a->kind == ExprKind::kFloatImm && b->kind == ExprKind::kFloatImm && a->dtype == b->dtype &&
         (a->dtype == DType::kFloat32 || a->dtype == DType::kFloat64);
}

double as_dtype(double v, DType t) {
  return t == DType::kFloat32 ? static_cast<double>(static_cast<float>(v)) : v;
}

// NaN-propagating, like the evaluator (and torch).
double fmax_nan(double a, double b) { return (std::isnan(a) || a > b) ? a : b; }
double fmin_nan(double a, double b) { return (std::isnan(a) || a < b) ? a : b; }

Expr fold_cast(DType t, const Expr& v) {
  if (v->kind == ExprKind::kIntImm) {
    int64_t x = v->int_value;
    if (t == DType::kBool) return bool_imm(x != 0);
    if (t == DType::kInt64) return int_imm(x, t);
    if (t == DType::kInt32) return int_imm(static_cast<int32_t>(x), t);  // wraps like the evaluator
    if (t == DType::kFloat32 || t == DType::kFloat64) {
      return float_imm(as_dtype(static_cast<double>(x), t), t);
    }
  }
  if (v->kind == ExprKind::kFloatImm && (t == DType::kFloat32 || t == DType::kFloat64) &&
      (v->dtype == DType::kFloat32 || v->dtype == DType::kFloat64)) {
    return float_imm(as_dtype(v->float_value, t), t);
  }
  return Expr();
}

}  // namespace

Expr Rewriter::simplify(const Expr& e) {
  if (e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm) return e;
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second.second;
  Expr r = visit(e);
  memo_.emplace(e.get(), std::make_pair(e, r));
  return r;
}

Expr Rewriter::visit(const Expr& e) {
  const ExprNode& n = *e;
  if (n.kind == ExprKind::kVar) {
    if (is_int(n.dtype) || n.dtype == DType::kBool) {
      ConstIntBound b = analyzer_.var_bound(e.get());
      if (b.lo == b.hi) return int_imm(b.lo, n.dtype);
    }
    return e;
  }
  if (n.kind == ExprKind::kSelect) return visit_select(e);
  // Integer sums and products are flattened as a whole (their inner +, -, * nodes are never
  // simplified one by one, which would cost a re-canonicalisation per nesting level).
  const bool int_typed = is_int(n.dtype);
  if (int_typed &&
      (n.kind == ExprKind::kAdd || n.kind == ExprKind::kSub || n.kind == ExprKind::kMul)) {
    return rewrite_linear(e);
  }

  std::vector<Expr> ops;
  ops.reserve(n.operands.size());
  bool changed = false;
  for (const Expr& o : n.operands) {
    ops.push_back(simplify(o));
    changed |= !ops.back().same_as(o);
  }
  Expr node = changed ? with_operands(e, ops) : e;
  switch (n.kind) {
    case ExprKind::kAdd:
    case ExprKind::kSub:
    case ExprKind::kMul:
      return rewrite_float_binary(node, ops[0], ops[1]);
    case ExprKind::kDiv:
      return rewrite_float_binary(node, ops[0], ops[1]);
    case ExprKind::kFloorDiv:
      return int_typed ? rewrite_floordiv(ops[0], ops[1]) : node;
    case ExprKind::kFloorMod:
      return int_typed ? rewrite_floormod(ops[0], ops[1]) : node;
    case ExprKind::kMin:
    case ExprKind::kMax:
      return int_typed ? rewrite_minmax(n.kind, ops[0], ops[1])
                       : rewrite_float_binary(node, ops[0], ops[1]);
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return rewrite_compare(n.kind, ops[0], ops[1]);
    case ExprKind::kAnd:
    case ExprKind::kOr:
      return rewrite_logic(n.kind, ops[0], ops[1]);
    case ExprKind::kNot:
      return rewrite_not(ops[0]);
    case ExprKind::kCast: {
      if (ops[0]->dtype == n.dtype) return ops[0];
      Expr folded = fold_cast(n.dtype, ops[0]);
      return folded.defined() ? folded : node;
    }
    default:
      return node;  // calls, accesses and loads: only their operands are simplified
  }
}

Expr Rewriter::visit_select(const Expr& e) {
  Expr cond = simplify(e->operands[0]);
  if (cond->kind == ExprKind::kIntImm) return simplify(e->operands[cond->int_value ? 1 : 2]);
  Expr t = simplify_assuming(e->operands[1], cond, true);
  Expr f = simplify_assuming(e->operands[2], cond, false);
  if (expr_equal(t, f)) return t;
  if (e->dtype == DType::kBool && t->kind == ExprKind::kIntImm && f->kind == ExprKind::kIntImm) {
    return t->int_value ? cond : rewrite_not(cond);  // t != f, so this is cond or !cond
  }
  return make_node(ExprKind::kSelect, e->dtype, {cond, t, f});
}

Expr Rewriter::simplify_assuming(const Expr& e, const Expr& cond, bool holds) {
  BoundMap overlay;
  if (analyzer_.overlay()) overlay = *analyzer_.overlay();
  bool narrowed = refine_bounds_with(
      cond, holds, [this](const ExprNode* v) { return analyzer_.var_bound(v); }, &overlay);
  if (!narrowed) return simplify(e);
  // Results cached under the outer bounds stay valid inside (the inner bounds are narrower),
  // but results computed inside must not leak out: run on a fresh memo and drop it afterwards.
  const BoundMap* outer = analyzer_.overlay();
  auto outer_memo = std::move(memo_);
  memo_.clear();
  analyzer_.set_overlay(&overlay);
  Expr r = simplify(e);
  analyzer_.set_overlay(outer);
  memo_ = std::move(outer_memo);
  return r;
}

Expr Rewriter::rewrite_linear(const Expr& e) {
  LinearParseOptions opts;
  opts.map_atom = [this](const Expr& atom) { return simplify(atom); };
  LinearForm f = to_linear(e, opts);
  if (!f.invalid) return finish_linear(std::move(f));
  // Too big to flatten in one go (a shared DAG) or a coefficient overflowed: simplify the two
  // operands on their own (memoised, so shared nodes are done once) and try again from there.
  Expr a = simplify(e->operands[0]), b = simplify(e->operands[1]);
  Expr node = a.same_as(e->operands[0]) && b.same_as(e->operands[1]) ? e : with_operands(e, {a, b});
  LinearForm g = to_linear(node);
  if (!g.invalid) return finish_linear(std::move(g));
  return node;
}

Expr Rewriter::finish_linear(LinearForm f) {
  if (f.terms.size() >= 2) merge_divmod_pairs(&f);
  return from_linear(f);
}

int64_t divmod_atom(const LinearTerm& t, ExprKind kind) {
  if (t.atoms.size() != 1) return 0;
  const Expr& a = t.atoms[0];
  if (a->kind != kind || a->operands[1]->kind != ExprKind::kIntImm) return 0;
  return a->operands[1]->int_value > 0 ? a->operands[1]->int_value : 0;
}

LinearForm without_terms(const LinearForm& f, size_t i, size_t j) {
  LinearForm g = f;
  g.terms.clear();
  for (size_t k = 0; k < f.terms.size(); ++k) {
    if (k != i && k != j) g.terms.push_back(f.terms[k]);
  }
  return g;
}

// x // c * (b*c) + x % c * b  ->  x * b      (splitting an index and putting it back together)
// x * b - x // c * (b*c)      ->  x % c * b  (only when it shortens the form)
bool Rewriter::merge_divmod_pairs(LinearForm* f) {
  bool any = false;
  for (int round = 0; round < 16; ++round) {
    bool changed = false;
    for (size_t i = 0; i < f->terms.size() && !changed; ++i) {
      int64_t c = divmod_atom(f->terms[i], ExprKind::kFloorMod);
      if (c == 0) continue;
      const Expr& x = f->terms[i].atoms[0]->operands[0];
      int64_t beta = f->terms[i].coef, want;
      if (!checked_mul(beta, c, &want)) continue;
      for (size_t j = 0; j < f->terms.size(); ++j) {
        if (divmod_atom(f->terms[j], ExprKind::kFloorDiv) != c || f->terms[j].coef != want ||
            !expr_equal(f->terms[j].atoms[0]->operands[0], x)) {
          continue;
        }
        LinearForm g = linear_add(without_terms(*f, i, j), to_linear(x), beta);
        if (!g.invalid) {
          *f = std::move(g);
          changed = true;
        }
        break;
      }
    }
    for (size_t j = 0; j < f->terms.size() && !changed; ++j) {
      int64_t c = divmod_atom(f->terms[j], ExprKind::kFloorDiv);
      if (c == 0 || f->terms[j].coef % c != 0) continue;
      int64_t beta = -(f->terms[j].coef / c);
      const Expr& x = f->terms[j].atoms[0]->operands[0];
      LinearForm g = linear_add(without_terms(*f, j, j), to_linear(x), -beta);
      g = linear_add(g, to_linear(rewrite_floormod(x, int_imm(c, x->dtype))), beta);
      if (!g.invalid && g.terms.size() < f->terms.size()) {
        *f = std::move(g);
        changed = true;
      }
    }
    if (!changed) break;
    any = true;
  }
  return any;
}

Expr Rewriter::rewrite_minmax(ExprKind kind, const Expr& a0, const Expr& b0) {
  Expr a = a0, b = b0;
  const bool is_min = kind == ExprKind::kMin;
  if (a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm) {
    bool pick_a = is_min ? a->int_value <= b->int_value : a->int_value >= b->int_value;
    return pick_a ? a : b;
  }
  LinearForm d = linear_add(to_linear(a), to_linear(b), -1);
  if (!d.invalid) {
    ConstIntBound bd = analyzer_.bound_linear(d);
    if (bd.hi <= 0) return is_min ? a : b;  // a <= b everywhere
    if (bd.lo >= 0) return is_min ? b : a;  // a >= b everywhere
  }
  if (a->kind == ExprKind::kIntImm) std::swap(a, b);  // constants go right
  // min(min(x, c1), c2) -> min(x, min(c1, c2))
  if (b->kind == ExprKind::kIntImm && a->kind == kind &&
      a->operands[1]->kind == ExprKind::kIntImm) {
    return rewrite_minmax(kind, a->operands[0], rewrite_minmax(kind, a->operands[1], b));
  }
  if (b->kind != ExprKind::kIntImm && compare_expr(a, b) > 0) std::swap(a, b);
  return make_node(kind, a->dtype, {a, b});
}

Expr Rewriter::rewrite_compare(ExprKind kind, const Expr& a0, const Expr& b0) {
  Expr a = a0, b = b0;
  if (a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm) {
    int64_t x = a->int_value, y = b->int_value;
    switch (kind) {
      case ExprKind::kEQ:
        return bool_imm(x == y);
      case ExprKind::kNE:
        return bool_imm(x != y);
      case ExprKind::kLT:
        return bool_imm(x < y);
      case ExprKind::kLE:
        return bool_imm(x <= y);
      case ExprKind::kGT:
        return bool_imm(x > y);
      default:
        return bool_imm(x >= y);
    }
  }
  if (foldable_float(a, b)) {
    double x = as_dtype(a->float_value, a->dtype), y = as_dtype(b->float_value, b->dtype);
    switch (kind) {
      case ExprKind::kEQ:
        return bool_imm(x == y);
      case ExprKind::kNE:
        return bool_imm(x != y);
      case ExprKind::kLT:
        return bool_imm(x < y);
      case ExprKind::kLE:
        return bool_imm(x <= y);
      case ExprKind::kGT:
        return bool_imm(x > y);
      default:
        return bool_imm(x >= y);
    }
  }
  if (!is_int(a->dtype)) {
    // Floats: NaN makes x == x false, so only booleans get the reflexive rule.
    if (a->dtype == DType::kBool && (kind == ExprKind::kEQ || kind == ExprKind::kNE) &&
        expr_equal(a, b)) {
      return bool_imm(kind == ExprKind::kEQ);
    }
    return make_node(kind, DType::kBool, {a, b});
  }
  // Integers computed from memory wrap around on overflow, as PyTorch's do: moving terms across
  // a comparison ((a + b) > a into b > 0) or dividing by a common factor would change the
  // answer, so only index arithmetic gets the canonical form.
  if (reads_memory(a) || reads_memory(b)) {
    if (expr_equal(a, b)) {
      return bool_imm(kind == ExprKind::kEQ || kind == ExprKind::kLE || kind == ExprKind::kGE);
    }
    return make_node(kind, DType::kBool, {a, b});
  }
  // Integers: canonical forms `P < Q` and `P == Q` with P, Q sums of positive terms.
  if (kind == ExprKind::kGT || kind == ExprKind::kGE) {
    std::swap(a, b);
    kind = kind == ExprKind::kGT ? ExprKind::kLT : ExprKind::kLE;
  }
  LinearForm d = linear_add(to_linear(a), to_linear(b), -1);
  if (kind == ExprKind::kLE && !checked_add(d.constant, -1, &d.constant)) d.invalid = true;
  if (d.invalid) return make_node(kind, DType::kBool, {a, b});
  if (kind == ExprKind::kLE) kind = ExprKind::kLT;  // a <= b  <=>  a - b - 1 < 0

  ConstIntBound bd = analyzer_.bound_linear(d);
  int64_t g = linear_coef_gcd(d);
  if (kind == ExprKind::kLT) {
    if (bd.hi < 0) return bool_imm(true);
    if (bd.lo >= 0) return bool_imm(false);
    // g*S + c < 0  <=>  S + floor(c / g) < 0
    if (g > 1) {
      for (LinearTerm& t : d.terms) t.coef /= g;
      int64_t q = d.constant / g;
      if (d.constant % g != 0 && d.constant < 0) --q;
      d.constant = q;
    }
  } else {
    bool is_eq = kind == ExprKind::kEQ;
    if (bd.lo > 0 || bd.hi < 0) return bool_imm(!is_eq);
    if (bd.lo == 0 && bd.hi == 0) return bool_imm(is_eq);
    if (g > 1) {
      if (d.constant % g != 0) return bool_imm(!is_eq);  // g*S == -c has no integer solution
      for (LinearTerm& t : d.terms) t.coef /= g;
      d.constant /= g;
    }
    // x == y and y == x must print alike: make the first coefficient positive.
    if (!d.terms.empty() && d.terms[0].coef < 0) d = linear_scale(d, -1);
    if (d.invalid) return make_node(kind, DType::kBool, {a, b});
  }
  // d = P - N + c   ->   P < N - c   (or  c < N  when P is empty)
  LinearForm p = linear_constant(0, d.dtype), q = linear_constant(0, d.dtype);
  for (const LinearTerm& t : d.terms) {
    if (t.coef > 0) {
      p.terms.push_back(t);
    } else {
      q.terms.push_back(LinearTerm{-t.coef, t.atoms});
    }
  }
  if (p.terms.empty()) {
    p.constant = d.constant;
  } else if (d.constant == std::numeric_limits<int64_t>::min()) {
    return make_node(kind, DType::kBool, {a, b});
  } else {
    q.constant = -d.constant;
  }
  return make_node(kind, DType::kBool, {from_linear(p), from_linear(q)});
}

Expr Rewriter::rewrite_not(const Expr& a) {
  if (a->kind == ExprKind::kIntImm) return bool_imm(a->int_value == 0);
  if (a->kind == ExprKind::kNot) return a->operands[0];
  if (is_comparison(a->kind) && is_int(a->operands[0]->dtype)) {
    const Expr& x = a->operands[0];
    const Expr& y = a->operands[1];
    switch (a->kind) {
      case ExprKind::kEQ:
        return rewrite_compare(ExprKind::kNE, x, y);
      case ExprKind::kNE:
        return rewrite_compare(ExprKind::kEQ, x, y);
      case ExprKind::kLT:
        return rewrite_compare(ExprKind::kLE, y, x);
      case ExprKind::kLE:
        return rewrite_compare(ExprKind::kLT, y, x);
      case ExprKind::kGT:
        return rewrite_compare(ExprKind::kLE, x, y);
      default:
        return rewrite_compare(ExprKind::kLT, x, y);  // !(x >= y)
    }
  }
  return make_node(ExprKind::kNot, DType::kBool, {a});
}

Expr Rewriter::rewrite_logic(ExprKind kind, const Expr& a, const Expr& b) {
  const bool is_and = kind == ExprKind::kAnd;
  if (a->kind == ExprKind::kIntImm) {
    // true && b = b, false && b = false; false || b = b, true || b = true.
    return (is_true(a) == is_and) ? b : bool_imm(!is_and);
  }
  if (b->kind == ExprKind::kIntImm) return (is_true(b) == is_and) ? a : bool_imm(!is_and);
  if (expr_equal(a, b)) return a;
  // x && !x, x || !x (comparisons are negated into canonical comparisons, so compare with the
  // canonical negation rather than looking for a Not node)
  if (expr_equal(rewrite_not(a), b)) return bool_imm(!is_and);
  return make_node(kind, DType::kBool, {a, b});
}

Expr Rewriter::rewrite_float_binary(const Expr& e, const Expr& a, const Expr& b) {
  if (!foldable_float(a, b)) return e;
  const DType t = a->dtype;
  double x = as_dtype(a->float_value, t), y = as_dtype(b->float_value, t);
  double r;
  switch (e->kind) {
    case ExprKind::kAdd:
      r = x + y;
      break;
    case ExprKind::kSub:
      r = x - y;
      break;
    case ExprKind::kMul:
      r = x * y;
      break;
    case ExprKind::kDiv:
      r = x / y;
      break;
    case ExprKind::kMin:
      r = fmin_nan(x, y);
      break;
    case ExprKind::kMax:
      r = fmax_nan(x, y);
      break;
    default:
      return e;
  }
  return float_imm(as_dtype(r, t), e->dtype);
}

Expr simplify(const Expr& e, const BoundMap* extra) {
  Rewriter r(extra);
  return r.simplify(e);
}

bool can_prove(const Expr& cond, const BoundMap* extra) {
  Expr s = simplify(cond, extra);
  return is_true(s);
}

}  // namespace tessera::ir
