#include "derive/instantiate.h"

#include "derive/config.h"
#include "ir/functor.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;
using ir::IterVar;
using ir::Tensor;

const char* scope_role_name(ScopeRole r) {
  switch (r) {
    case ScopeRole::kOperator:
      return "operator";
    case ScopeRole::kEOperator:
      return "eOperator";
    case ScopeRole::kCompileTime:
      return "compile-time";
  }
  return "?";
}

ScopeCost scope_cost(const Tensor& scope) {
  const ir::ComputeOpNode& op = *scope->op;
  double points = 1;
  for (const IterVar& iv : op.axes) points *= static_cast<double>(const_extent(iv));
  for (const IterVar& iv : op.reduce_axes) points *= static_cast<double>(const_extent(iv));
  int ops = op.reduce == ir::ReduceKind::kNone ? 0 : 1;
  ir::visit_expr(op.body, [&](const Expr& e) {
    if (!ir::is_float(e->dtype)) return;
    if (ir::is_binary(e->kind) || e->kind == ExprKind::kCall) ++ops;
  });
  ScopeCost c;
  c.flops = points * ops;
  auto numel = [](const Tensor& t) {
    double n = 1;
    for (int64_t d : const_shape(t)) n *= static_cast<double>(d);
    return n;
  };
  c.elements = numel(scope);
  for (const Tensor& in : ir::direct_inputs(scope)) c.elements += numel(in);
  return c;
}

bool is_eoperator(const Tensor& scope) {
  return scope_cost(scope).intensity() < DeriveConstants::kEOperatorIntensity;
}

bool is_weight_only(const Tensor& t, const DeriveContext& ctx) {
  if (t->is_placeholder()) return ctx.is_weight(t);
  for (const Tensor& in : ir::direct_inputs(t)) {
    if (!is_weight_only(in, ctx)) return false;
  }
  return true;
}

namespace {

int layout_operands(const OperatorMatch& m) {
  return int{m.a.needs_layout} + int{m.b.needs_layout} + int{m.out.needs_layout};
}

}  // namespace

std::vector<ScopeChoice> instantiate(const State& s, const DeriveContext& ctx) {
  std::vector<ScopeChoice> out;
  for (const Tensor& scope : scopes(s)) {
    ScopeChoice c;
    c.scope = scope;
    c.cost = scope_cost(scope);
    if (is_weight_only(scope, ctx)) {
      c.role = ScopeRole::kCompileTime;
    } else if (c.cost.intensity() >= DeriveConstants::kEOperatorIntensity) {
      // Of the operators the scope matches exactly, the first in the table's order that reads
      // the fewest operands through layout eOperators (a band product is a batch matmul only
      // through an im2col-sized copy of its band operand, and a G2BMM as it stands).
      int fewest_layouts = 4;
      for (OperatorKind k : table_operators()) {
        MatchOutcome mo = match_operator(s, scope, k, ctx);
        if (!mo.match || mo.distance != 0) continue;
        const int layouts = layout_operands(*mo.match);
        if (layouts >= fewest_layouts) continue;
        fewest_layouts = layouts;
        c.role = ScopeRole::kOperator;
        c.match = mo.match;
      }
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera::derive
