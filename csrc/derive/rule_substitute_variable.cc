// Variable substitution with an inferred bijection (EinNet 4.1).
#include <sstream>

#include "derive/index_analysis.h"
#include "derive/rules_intra.h"
#include "ir/linear_form.h"
#include "ir/printer.h"

namespace tessera::derive {

using ir::Expr;
using ir::IterVar;
using ir::Tensor;

namespace {

int axis_position(const ir::ComputeOpNode& op, const ir::ExprNode* v) {
  for (size_t i = 0; i < op.axes.size(); ++i) {
    if (op.axes[i].var.get() == v) return static_cast<int>(i);
  }
  return -1;
}

// The affine form when it is over >= 2 traversal iterators of `op` and nothing else.
std::optional<AffineIndex> traversal_affine(const ir::ComputeOpNode& op, const Expr& index) {
  auto aff = affine_index(index);
  if (!aff || aff->terms.size() < 2) return std::nullopt;
  for (const auto& [v, c] : aff->terms) {
    if (axis_position(op, v.get()) < 0) return std::nullopt;
  }
  return aff;
}

// sum of the terms of `aff` other than `skip`, plus its constant, over the mapped variables.
Expr affine_rest(const AffineIndex& aff, const ir::ExprNode* skip, const ir::VarMap& vmap) {
  Expr e = ir::int_imm(aff.constant);
  for (const auto& [v, c] : aff.terms) {
    if (v.get() == skip) continue;
    e = e + ir::int_imm(c) * vmap.at(v.get());
  }
  return e;
}

bool all_reads_in_bounds(const State& s, const Tensor& scope) {
  for (const Tensor& c : consumers(s, scope)) {
    for (const Expr& r : accesses_of(c->op->body, scope)) {
      if (!reads_in_bounds(r)) return false;
    }
  }
  return true;
}

// Replaces access indices equal to `index` (after simplification) by `replacement`.
class ReplaceIndex : public ir::ExprMutator {
 public:
  ReplaceIndex(Expr index, Expr replacement)
      : index_(std::move(index)), replacement_(std::move(replacement)) {}
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ir::ExprKind::kAccess) return m;
    std::vector<Expr> idx = m->operands;
    for (Expr& i : idx) {
      if (ir::expr_equal(ir::simplify(i), index_)) i = replacement_;
    }
    return ir::access(m->tensor, idx);
  }

 private:
  Expr index_, replacement_;
};

}  // namespace

std::optional<State> substitute_variable(const State& s, const Tensor& scope, const Expr& index,
                                         int axis) {
  if (scope->is_placeholder() || !has_const_extents(scope)) return std::nullopt;
  const ir::ComputeOpNode& op = *scope->op;
  if (axis < 0 || static_cast<size_t>(axis) >= op.axes.size()) return std::nullopt;
  auto aff = traversal_affine(op, index);
  if (!aff) return std::nullopt;
  const ir::ExprNode* v = op.axes[axis].var.get();
  const int64_t c = aff->coef(v);
  if (c == 0) return std::nullopt;
  const ir::ConstIntBound b = index_bound(index);
  if (b.lo == ir::kNoLowerBound || b.hi == ir::kNoUpperBound) return std::nullopt;
  // New scope S' over y = x with v replaced by t in [0, hi - lo].
  ir::VarMap sub_map;
  std::vector<IterVar> y = fresh_copies(op.axes, &sub_map);
  const IterVar t = fresh_iter("t_" + op.axes[axis].var->name, b.hi - b.lo + 1);
  const Expr fresh_v = sub_map.at(v);
  y[axis] = t;
  std::vector<IterVar> red = fresh_copies(op.reduce_axes, &sub_map);
  // Reads at the index itself read at t + lo.
  Expr body = ReplaceIndex(ir::simplify(ir::substitute(index, sub_map)), t.var + ir::int_imm(b.lo))
                  .mutate(substitute_body(op.body, sub_map));
  if (ir::uses_var(body, fresh_v)) {
    // v is still used elsewhere: Phi^-1 gives v = c * (t + lo - rest), a bijection when
    // c = +-1 (c * c = 1). Otherwise Phi is only injective and v cannot be recovered.
    if (c != 1 && c != -1) return std::nullopt;
    ir::VarMap inverse{{fresh_v.get(), ir::int_imm(c) * (t.var + ir::int_imm(b.lo) -
                                                         affine_rest(*aff, v, sub_map))}};
    body = substitute_body(body, inverse);
  }
  Tensor sub =
      make_scope(scope->name + "_sub", y, red, op.reduce, body, "derived", scope->pad_value);
  std::ostringstream rule;
  rule << "substitute_variable(" << scope->name << ": " << op.axes[axis].var->name << " -> "
       << ir::to_string(index) << ")";
  // The replaced scope is read as S'[Phi(x)]. In the paper that read is part of the consumer's
  // expression, so consumers read S' at Phi of their indices directly; that needs their reads
  // inside the old shape (Phi of a point outside it may land inside the box). Otherwise, and
  // for outputs, the read stays a gather scope L_x S'[Phi(x)].
  if (!is_output(s, scope) && all_reads_in_bounds(s, scope)) {
    const std::vector<IterVar> axes = op.axes;
    Reindex phi_of = [axes, axis, index, lo = b.lo](const std::vector<Expr>& idx) {
      ir::VarMap at;
      for (size_t d = 0; d < axes.size(); ++d) at[axes[d].var.get()] = idx[d];
      std::vector<Expr> out = idx;
      out[axis] = ir::substitute(index, at) - ir::int_imm(lo);
      return out;
    };
    return replace_scope(s, scope, {sub, phi_of}, rule.str());
  }
  ir::VarMap gather_map;
  std::vector<IterVar> x = fresh_copies(op.axes, &gather_map);
  std::vector<Expr> phi = iter_exprs(x);
  phi[axis] = ir::simplify(ir::substitute(index, gather_map) - ir::int_imm(b.lo));
  Tensor gather = make_scope(scope->name, x, {}, ir::ReduceKind::kNone, ir::access(sub, phi),
                             "derived", scope->pad_value);
  return replace_scope(s, scope, {gather, {}}, rule.str());
}

std::optional<State> split_summation_iterator(const State& s, const Tensor& scope, int axis,
                                              int64_t inner) {
  if (scope->is_placeholder() || !has_const_extents(scope)) return std::nullopt;
  const ir::ComputeOpNode& op = *scope->op;
  if (axis < 0 || static_cast<size_t>(axis) >= op.reduce_axes.size()) return std::nullopt;
  const IterVar& r = op.reduce_axes[axis];
  const int64_t extent = const_extent(r);
  if (inner <= 1 || inner >= extent || extent % inner != 0) return std::nullopt;
  ir::VarMap vmap;
  std::vector<IterVar> axes = fresh_copies(op.axes, &vmap);
  std::vector<IterVar> red = fresh_copies(op.reduce_axes, &vmap);
  const IterVar a = fresh_iter(r.var->name + "_o", extent / inner);
  const IterVar b = fresh_iter(r.var->name + "_i", inner);
  red[axis] = a;
  red.insert(red.begin() + axis + 1, b);
  vmap[r.var.get()] = a.var * ir::int_imm(inner) + b.var;
  Tensor split = make_scope(scope->name, axes, red, op.reduce, substitute_body(op.body, vmap),
                            "derived", scope->pad_value);
  std::ostringstream rule;
  rule << "split_summation_iterator(" << scope->name << "." << r.var->name << " by " << inner
       << ")";
  return replace_scope(s, scope, {split, {}}, rule.str());
}

namespace {

// The part of an affine index over traversal iterators of `op`, when it has >= 2 of them.
std::optional<Expr> traversal_part(const ir::ComputeOpNode& op, const Expr& index) {
  auto aff = affine_index(index);
  if (!aff) return std::nullopt;
  Expr part = ir::int_imm(0);
  int count = 0;
  bool all = true;
  for (const auto& [v, c] : aff->terms) {
    if (axis_position(op, v.get()) < 0) {
      all = false;
      continue;
    }
    part = part + ir::int_imm(c) * v;
    ++count;
  }
  if (count < 2) return std::nullopt;
  return all ? index : ir::simplify(part);
}

// Summation iterators that share an index with a traversal iterator (kernel offsets).
bool is_offset(const ir::ComputeOpNode& op, const IterVar& r) {
  for (const Expr& a : accesses(op.body)) {
    for (const Expr& index : a->operands) {
      if (!ir::uses_var(index, r.var)) continue;
      for (const IterVar& x : op.axes) {
        if (ir::uses_var(index, x.var)) return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<State> variable_substitutions(const State& s) {
  std::vector<State> out;
  for (const Tensor& scope : scopes(s)) {
    const ir::ComputeOpNode& op = *scope->op;
    std::vector<Expr> seen;  // each distinct index once per scope
    for (const Expr& a : accesses(op.body)) {
      for (const Expr& operand : a->operands) {
        auto index = traversal_part(op, operand);
        if (!index) continue;
        bool dup = false;
        for (const Expr& e : seen) dup |= ir::can_prove(ir::eq(e, *index));
        if (dup) continue;
        seen.push_back(*index);
        const AffineIndex aff = *affine_index(*index);
        for (const auto& [v, c] : aff.terms) {
          if (auto next = substitute_variable(s, scope, *index, axis_position(op, v.get()))) {
            out.push_back(std::move(*next));
          }
        }
      }
    }
    for (size_t r = 0; r < op.reduce_axes.size(); ++r) {
      if (!is_offset(op, op.reduce_axes[r])) continue;
      const int64_t extent = const_extent(op.reduce_axes[r]);
      for (int64_t inner = 2; inner < extent; ++inner) {
        if (auto next = split_summation_iterator(s, scope, static_cast<int>(r), inner)) {
          out.push_back(std::move(*next));
        }
      }
    }
  }
  return out;
}

}  // namespace tessera::derive
