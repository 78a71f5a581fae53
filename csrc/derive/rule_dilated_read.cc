// Layout separation of a dilated read (EinNet's Longformer derivation: G2BMM with dilation D
// becomes a dilation-1 band over T's rows regrouped by residue).
#include <cstdlib>
#include <numeric>
#include <sstream>

#include "derive/index_analysis.h"
#include "derive/rules_intra.h"
#include "ir/eval.h"
#include "ir/linear_form.h"
#include "ir/printer.h"

namespace tessera::derive {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;

namespace {

bool is_traversal(const ir::ComputeOpNode& op, const ir::ExprNode* v) {
  for (const IterVar& iv : op.axes) {
    if (iv.var.get() == v) return true;
  }
  return false;
}

// How a dilated index m + D*u + c splits: the unit iterator m, the dilation D, and u + c // D
// (the other terms divided by D, plus the constant's quotient) with the constant's residue.
struct DilatedIndex {
  ir::Var unit;
  int64_t dilation = 0;
  Expr rest;            // u + floor(c / D)
  int64_t residue = 0;  // c mod D, in [0, D)
};

// The split of `index` when it is m + D*u + c over traversal iterators of `op`: exactly one
// term with coefficient 1 (m, extent >= 2 * D), the others sharing the factor D >= 2.
std::optional<DilatedIndex> dilated_index(const ir::ComputeOpNode& op, const Expr& index) {
  auto aff = affine_index(index);
  if (!aff || aff->terms.size() < 2) return std::nullopt;
  DilatedIndex out;
  int64_t g = 0;
  int units = 0;
  for (const auto& [v, c] : aff->terms) {
    if (!is_traversal(op, v.get())) return std::nullopt;
    if (c == 1) {
      out.unit = v;
      ++units;
    } else {
      g = std::gcd(g, std::abs(c));
    }
  }
  if (units != 1 || g < 2) return std::nullopt;
  for (const IterVar& iv : op.axes) {
    if (iv.var.get() == out.unit.get() && const_extent(iv) < 2 * g) return std::nullopt;
  }
  out.dilation = g;
  out.residue = ir::floormod_int(aff->constant, g);
  Expr rest = ir::int_imm(ir::floordiv_int(aff->constant, g));
  for (const auto& [v, c] : aff->terms) {
    if (v.get() != out.unit.get()) rest = rest + ir::int_imm(c / g) * v;
  }
  out.rest = rest;
  return out;
}

// Replaces reads equal to `from` by `to`.
class ReplaceRead : public ir::ExprMutator {
 public:
  ReplaceRead(Expr from, Expr to) : from_(std::move(from)), to_(std::move(to)) {}
  Expr mutate(const Expr& e) override {
    if (e->kind == ir::ExprKind::kAccess && ir::expr_equal(e, from_)) return to_;
    return mutate_children(e);
  }

 private:
  Expr from_, to_;
};

// The scope rewritten to `body` (over its own iterators) with its unit iterator m regrouped:
// S'[.., q, p, ..] = body at m = D*q + p, and S[.., m, ..] = S'[.., m // D, m % D, ..] in its
// place. `vmap` already maps the summation iterators to their copies `red`.
std::optional<State> with_rows_regrouped(const State& s, const Tensor& scope, const Expr& body,
                                         const DilatedIndex& dil, const std::vector<IterVar>& red,
                                         ir::VarMap vmap, const std::string& rule) {
  const ir::ComputeOpNode& op = *scope->op;
  const Expr d = ir::int_imm(dil.dilation);
  std::vector<IterVar> split_axes;
  for (const IterVar& iv : op.axes) {
    if (iv.var.get() != dil.unit.get()) {
      split_axes.push_back(fresh_copies({iv}, &vmap)[0]);
      continue;
    }
    const int64_t extent = const_extent(iv);
    if (extent % dil.dilation != 0) return std::nullopt;
    const IterVar q = fresh_iter(iv.var->name + "_q", extent / dil.dilation);
    const IterVar r = fresh_iter(iv.var->name + "_r", dil.dilation);
    vmap[iv.var.get()] = d * q.var + r.var;
    split_axes.push_back(q);
    split_axes.push_back(r);
  }
  const Tensor rows = make_scope(scope->name + "_by_residue", split_axes, red, op.reduce,
                                 substitute_body(body, vmap), "derived", scope->pad_value);
  ir::VarMap unused;
  const std::vector<IterVar> x = fresh_copies(op.axes, &unused);
  std::vector<Expr> at;
  for (size_t a = 0; a < x.size(); ++a) {
    if (op.axes[a].var.get() != dil.unit.get()) {
      at.push_back(x[a].var);
      continue;
    }
    at.push_back(ir::floordiv(x[a].var, d));
    at.push_back(ir::floormod(x[a].var, d));
  }
  const Tensor reshaped = make_scope(scope->name, x, {}, ir::ReduceKind::kNone,
                                     ir::access(rows, at), "derived", scope->pad_value);
  return replace_scope(s, scope, {reshaped, {}}, rule);
}

}  // namespace

std::optional<State> separate_dilated_read(const State& s, const Tensor& scope, const Expr& read,
                                           int dim, bool split_unit) {
  if (scope->is_placeholder() || !has_const_extents(scope)) return std::nullopt;
  const ir::ComputeOpNode& op = *scope->op;
  if (read->kind != ir::ExprKind::kAccess || dim < 0 ||
      static_cast<size_t>(dim) >= read->operands.size()) {
    return std::nullopt;
  }
  auto dil = dilated_index(op, read->operands[static_cast<size_t>(dim)]);
  if (!dil) return std::nullopt;
  const Expr d = ir::int_imm(dil->dilation);
  const Expr shifted = dil->unit + ir::int_imm(dil->residue);
  // index = D * (rest + (m + r) // D) + (m + r) % D.
  const Expr quotient = ir::simplify(dil->rest + ir::floordiv(shifted, d));
  const ir::ConstIntBound b = index_bound(quotient);
  if (b.lo == ir::kNoLowerBound || b.hi == ir::kNoUpperBound) return std::nullopt;
  const Tensor& src = read->tensor;
  const std::vector<int64_t> shape = const_shape(src);
  // L[others.., p, n] = T[.., D * (n + lo) + p, ..] over p in [0, D), n in [0, hi - lo]: the
  // regrouped dims innermost, so that the band is unit-stride in memory whatever T's layout.
  const IterVar p = fresh_iter("p", dil->dilation);
  const IterVar n = fresh_iter("n", b.hi - b.lo + 1);
  std::vector<IterVar> axes;
  std::vector<Expr> at;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (static_cast<int>(i) == dim) {
      at.push_back(d * (n.var + ir::int_imm(b.lo)) + p.var);
      continue;
    }
    axes.push_back(fresh_iter("i" + std::to_string(i), shape[i]));
    at.push_back(axes.back().var);
  }
  axes.push_back(p);
  axes.push_back(n);
  const Tensor layout = make_scope(src->name + "_by_residue", axes, {}, ir::ReduceKind::kNone,
                                   ir::access(src, at), "relayout", src->pad_value);
  std::vector<Expr> idx;
  for (size_t i = 0; i < read->operands.size(); ++i) {
    if (static_cast<int>(i) != dim) idx.push_back(read->operands[i]);
  }
  idx.push_back(ir::simplify(ir::floormod(shifted, d)));
  idx.push_back(ir::simplify(quotient - ir::int_imm(b.lo)));
  const Expr body = ReplaceRead(read, ir::access(layout, idx)).mutate(op.body);
  std::ostringstream rule;
  rule << "separate_dilated_read(" << scope->name << ": " << src->name << " dim " << dim
       << " by residue mod " << dil->dilation << (split_unit ? ", rows regrouped" : "") << ")";
  ir::VarMap vmap;
  std::vector<IterVar> red = fresh_copies(op.reduce_axes, &vmap);
  if (!split_unit) {
    std::vector<IterVar> x = fresh_copies(op.axes, &vmap);
    const Tensor rewritten = make_scope(scope->name, x, red, op.reduce, substitute_body(body, vmap),
                                        "derived", scope->pad_value);
    return replace_scope(s, scope, {rewritten, {}}, rule.str());
  }
  return with_rows_regrouped(s, scope, body, *dil, red, vmap, rule.str());
}

std::vector<State> dilated_read_layouts(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    std::vector<Expr> seen;  // each distinct read once per scope
    for (const Expr& a : accesses(scope->op->body)) {
      bool dup = false;
      for (const Expr& e : seen) dup |= ir::expr_equal(e, a);
      if (dup) continue;
      seen.push_back(a);
      for (size_t dim = 0; dim < a->operands.size(); ++dim) {
        for (bool split_unit : {false, true}) {
          if (auto next = separate_dilated_read(s, scope, a, static_cast<int>(dim), split_unit)) {
            out.push_back(std::move(*next));
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tessera::derive
