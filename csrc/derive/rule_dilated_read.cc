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

}  // namespace

std::optional<State> separate_dilated_read(const State& s, const Tensor& scope, const Expr& read,
                                           int dim) {
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
  ir::VarMap vmap;
  std::vector<IterVar> x = fresh_copies(op.axes, &vmap);
  std::vector<IterVar> red = fresh_copies(op.reduce_axes, &vmap);
  const Expr body =
      substitute_body(ReplaceRead(read, ir::access(layout, idx)).mutate(op.body), vmap);
  const Tensor rewritten =
      make_scope(scope->name, x, red, op.reduce, body, "derived", scope->pad_value);
  std::ostringstream rule;
  rule << "separate_dilated_read(" << scope->name << ": " << src->name << " dim " << dim
       << " by residue mod " << dil->dilation << ")";
  return replace_scope(s, scope, {rewritten, {}}, rule.str());
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
        if (auto next = separate_dilated_read(s, scope, a, static_cast<int>(dim))) {
          out.push_back(std::move(*next));
        }
      }
    }
  }
  return out;
}

}  // namespace tessera::derive
