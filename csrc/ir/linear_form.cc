#include "ir/linear_form.h"

#include <algorithm>
#include <cstring>

#include "ir/buffer.h"
#include "ir/tensor.h"

namespace tessera::ir {

bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }
bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

namespace {

template <typename T>
int three_way(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Tensors and buffers have no id; names give a run-to-run stable order, the address only breaks
// ties between distinct objects with equal names.
template <typename P>
int compare_named(const P& a, const P& b) {
  if (a == b) return 0;
  if (int c = a->name.compare(b->name)) return c < 0 ? -1 : 1;
  return three_way(a.get(), b.get());
}

int compare_monomials(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (int c = compare_expr(a[i], b[i])) return c;
  }
  return three_way(a.size(), b.size());
}

}  // namespace

int compare_expr(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return 0;
  const ExprNode& x = *a;
  const ExprNode& y = *b;
  if (x.kind != y.kind) return three_way(static_cast<int>(x.kind), static_cast<int>(y.kind));
  if (x.dtype != y.dtype) return three_way(static_cast<int>(x.dtype), static_cast<int>(y.dtype));
  switch (x.kind) {
    case ExprKind::kIntImm:
      return three_way(x.int_value, y.int_value);
    case ExprKind::kFloatImm: {
      // Bit patterns, so that -0.0 and 0.0 (and NaN payloads) are distinct constants.
      uint64_t bx, by;
      std::memcpy(&bx, &x.float_value, sizeof bx);
      std::memcpy(&by, &y.float_value, sizeof by);
      return three_way(bx, by);
    }
    case ExprKind::kVar:
      return three_way(x.var_id, y.var_id);
    case ExprKind::kCall:
      if (x.call_op != y.call_op) {
        return three_way(static_cast<int>(x.call_op), static_cast<int>(y.call_op));
      }
      break;
    case ExprKind::kAccess:
      if (int c = compare_named(x.tensor, y.tensor)) return c;
      break;
    case ExprKind::kLoad:
      if (int c = compare_named(x.buffer, y.buffer)) return c;
      break;
    default:
      break;
  }
  if (x.operands.size() != y.operands.size()) {
    return three_way(x.operands.size(), y.operands.size());
  }
  for (size_t i = 0; i < x.operands.size(); ++i) {
    if (int c = compare_expr(x.operands[i], y.operands[i])) return c;
  }
  return 0;
}

LinearForm linear_constant(int64_t c, DType dtype) {
  LinearForm f;
  f.dtype = dtype;
  f.constant = c;
  return f;
}

LinearForm linear_atom(const Expr& atom) {
  LinearForm f;
  f.dtype = atom->dtype;
  f.terms.push_back(LinearTerm{1, {atom}});
  return f;
}

void linear_normalize(LinearForm* f) {
  auto& t = f->terms;
  std::stable_sort(t.begin(), t.end(), [](const LinearTerm& a, const LinearTerm& b) {
    return compare_monomials(a.atoms, b.atoms) < 0;
  });
  std::vector<LinearTerm> merged;
  merged.reserve(t.size());
  for (LinearTerm& term : t) {
    if (!merged.empty() && compare_monomials(merged.back().atoms, term.atoms) == 0) {
      if (!checked_add(merged.back().coef, term.coef, &merged.back().coef)) f->invalid = true;
    } else {
      merged.push_back(std::move(term));
    }
  }
  merged.erase(
      std::remove_if(merged.begin(), merged.end(), [](const LinearTerm& x) { return x.coef == 0; }),
      merged.end());
  t = std::move(merged);
}

LinearForm linear_add(const LinearForm& a, const LinearForm& b, int64_t scale) {
  LinearForm r = a;
  r.invalid |= b.invalid;
  int64_t c;
  if (!checked_mul(b.constant, scale, &c) || !checked_add(r.constant, c, &r.constant)) {
    r.invalid = true;
  }
  for (const LinearTerm& t : b.terms) {
    LinearTerm s = t;
    if (!checked_mul(t.coef, scale, &s.coef)) r.invalid = true;
    r.terms.push_back(std::move(s));
  }
  linear_normalize(&r);
  return r;
}

LinearForm linear_scale(const LinearForm& a, int64_t k) {
  if (k == 0) return linear_constant(0, a.dtype);
  LinearForm r = a;
  if (!checked_mul(r.constant, k, &r.constant)) r.invalid = true;
  for (LinearTerm& t : r.terms) {
    if (!checked_mul(t.coef, k, &t.coef)) r.invalid = true;
  }
  return r;  // order and distinctness are unchanged by a non-zero scale
}

LinearForm linear_mul(const LinearForm& a, const LinearForm& b) {
  if (a.is_constant()) {
    LinearForm r = linear_scale(b, a.constant);
    r.invalid |= a.invalid;
    return r;
  }
  if (b.is_constant()) {
    LinearForm r = linear_scale(a, b.constant);
    r.invalid |= b.invalid;
    return r;
  }
  LinearForm r = linear_constant(0, a.dtype);
  r.invalid = a.invalid || b.invalid;
  if (!checked_mul(a.constant, b.constant, &r.constant)) r.invalid = true;
  auto push = [&](int64_t c1, int64_t c2, std::vector<Expr> atoms) {
    LinearTerm t;
    if (!checked_mul(c1, c2, &t.coef)) r.invalid = true;
    std::sort(atoms.begin(), atoms.end(),
              [](const Expr& x, const Expr& y) { return compare_expr(x, y) < 0; });
    t.atoms = std::move(atoms);
    r.terms.push_back(std::move(t));
  };
  for (const LinearTerm& ta : a.terms) {
    for (const LinearTerm& tb : b.terms) {
      std::vector<Expr> atoms = ta.atoms;
      atoms.insert(atoms.end(), tb.atoms.begin(), tb.atoms.end());
      push(ta.coef, tb.coef, std::move(atoms));
    }
    if (b.constant != 0) push(ta.coef, b.constant, ta.atoms);
  }
  if (a.constant != 0) {
    for (const LinearTerm& tb : b.terms) push(a.constant, tb.coef, tb.atoms);
  }
  linear_normalize(&r);
  return r;
}

namespace {

// Accumulates scaled terms into one form and normalizes once at the end, so a chain of n
// additions costs O(n log n) rather than a merge per node.
class LinearParser {
 public:
  explicit LinearParser(const LinearParseOptions& opts) : opts_(opts) {}

  LinearForm parse(const Expr& e, bool mapped) {
    LinearForm f = linear_constant(0, e->dtype);
    collect(e, 1, mapped, &f);
    linear_normalize(&f);
    return f;
  }

 private:
  void collect(const Expr& e, int64_t scale, bool mapped, LinearForm* out) {
    if (out->invalid) return;
    if (++nodes_ > opts_.max_nodes) {
      out->invalid = true;
      return;
    }
    int64_t v;
    switch (e->kind) {
      case ExprKind::kIntImm:
        if (!checked_mul(e->int_value, scale, &v) ||
            !checked_add(out->constant, v, &out->constant)) {
          out->invalid = true;
        }
        return;
      case ExprKind::kAdd:
        collect(e->operands[0], scale, mapped, out);
        collect(e->operands[1], scale, mapped, out);
        return;
      case ExprKind::kSub:
        collect(e->operands[0], scale, mapped, out);
        if (!checked_mul(scale, -1, &v)) {
          out->invalid = true;
          return;
        }
        collect(e->operands[1], v, mapped, out);
        return;
      case ExprKind::kMul:
        collect_product(e, scale, mapped, out);
        return;
      default:
        break;
    }
    if (mapped && opts_.map_atom) {
      Expr m = opts_.map_atom(e);
      switch (m->kind) {
        case ExprKind::kIntImm:
        case ExprKind::kAdd:
        case ExprKind::kSub:
        case ExprKind::kMul:
          collect(m, scale, false, out);
          return;
        default:
          push(out, scale, {m});
      }
      return;
    }
    push(out, scale, {e});
  }

  void collect_product(const Expr& e, int64_t scale, bool mapped, LinearForm* out) {
    const Expr& a = e->operands[0];
    const Expr& b = e->operands[1];
    int64_t v;
    if (a->kind == ExprKind::kIntImm || b->kind == ExprKind::kIntImm) {
      const Expr& c = a->kind == ExprKind::kIntImm ? a : b;
      if (!checked_mul(c->int_value, scale, &v)) {
        out->invalid = true;
        return;
      }
      collect(a->kind == ExprKind::kIntImm ? b : a, v, mapped, out);
      return;
    }
    LinearForm pa = parse(a, mapped), pb = parse(b, mapped);
    LinearForm prod;
    size_t n = (pa.terms.size() + 1) * (pb.terms.size() + 1);
    if (pa.is_constant() || pb.is_constant() ||
        (opts_.distribute && n <= opts_.max_distributed_terms)) {
      prod = linear_mul(pa, pb);
    } else {
      // Kept as one atom; when atoms are being mapped, rebuild it from the canonical sides.
      Expr atom = e;
      if (mapped && opts_.map_atom) {
        Expr x = from_linear(pa), y = from_linear(pb);
        if (compare_expr(x, y) > 0) std::swap(x, y);
        atom = make_node(ExprKind::kMul, e->dtype, {x, y});
      }
      prod = linear_atom(atom);
      prod.invalid = pa.invalid || pb.invalid;
    }
    if (prod.invalid) {
      out->invalid = true;
      return;
    }
    if (!checked_mul(prod.constant, scale, &v) || !checked_add(out->constant, v, &out->constant)) {
      out->invalid = true;
    }
    for (const LinearTerm& t : prod.terms) push(out, scale, t.atoms, t.coef);
  }

  void push(LinearForm* out, int64_t scale, std::vector<Expr> atoms, int64_t coef = 1) {
    LinearTerm t;
    if (!checked_mul(scale, coef, &t.coef)) out->invalid = true;
    t.atoms = std::move(atoms);
    out->terms.push_back(std::move(t));
  }

  const LinearParseOptions& opts_;
  size_t nodes_ = 0;
};

}  // namespace

LinearForm to_linear(const Expr& e, const LinearParseOptions& opts) {
  LinearParser p(opts);
  LinearForm f = p.parse(e, true);
  f.dtype = e->dtype;
  return f;
}

Expr monomial_expr(const std::vector<Expr>& atoms) {
  Expr m = atoms[0];
  for (size_t i = 1; i < atoms.size(); ++i) m = mul(m, atoms[i]);
  return m;
}

Expr from_linear(const LinearForm& f) {
  const DType t = f.dtype;
  auto scaled = [&](const LinearTerm& term, int64_t k) {
    Expr m = monomial_expr(term.atoms);
    return k == 1 ? m : mul(m, int_imm(k, t));
  };
  Expr acc;
  for (const LinearTerm& term : f.terms) {
    if (term.coef > 0)
      acc = acc.defined() ? add(acc, scaled(term, term.coef)) : scaled(term, term.coef);
  }
  int64_t constant = f.constant;
  for (const LinearTerm& term : f.terms) {
    if (term.coef > 0) continue;
    if (!acc.defined()) {
      if (constant > 0) {
        acc = int_imm(constant, t);  // reads as `c - x`, e.g. reversed indices
        constant = 0;
      } else if (term.coef == -1) {
        acc = sub(int_imm(0, t), monomial_expr(term.atoms));
        continue;
      } else {
        acc = scaled(term, term.coef);
        continue;
      }
    }
    // -coef cannot overflow here unless coef is INT64_MIN; keep that one as an added product.
    if (term.coef == std::numeric_limits<int64_t>::min()) {
      acc = add(acc, scaled(term, term.coef));
    } else {
      acc = sub(acc, scaled(term, -term.coef));
    }
  }
  if (!acc.defined()) return int_imm(constant, t);
  if (constant > 0) return add(acc, int_imm(constant, t));
  if (constant < 0 && constant != std::numeric_limits<int64_t>::min()) {
    return sub(acc, int_imm(-constant, t));
  }
  if (constant < 0) return add(acc, int_imm(constant, t));
  return acc;
}

int64_t linear_coef_gcd(const LinearForm& f) {
  uint64_t g = 0;
  for (const LinearTerm& t : f.terms) {
    uint64_t m = t.coef < 0 ? 0 - static_cast<uint64_t>(t.coef) : static_cast<uint64_t>(t.coef);
    while (m != 0) {
      uint64_t r = g % m;
      g = m;
      m = r;
    }
  }
  // A gcd of 2^63 (all coefficients INT64_MIN) is not representable; 1 disables gcd rules.
  return g > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? 1
                                                                        : static_cast<int64_t>(g);
}

}  // namespace tessera::ir
