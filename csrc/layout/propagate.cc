#include "layout/propagate.h"

#include "ir/functor.h"

namespace tessera::layout {

using ir::Expr;
using ir::Tensor;

namespace {

// Whether every read of `p` in `c`'s body is at `c`'s iterators, in order, and there is one.
bool reads_in_place(const Tensor& c, const Tensor& p) {
  if (c->op->reduce != ir::ReduceKind::kNone || c->shape.size() != p->shape.size()) return false;
  for (size_t d = 0; d < c->shape.size(); ++d) {
    if (!c->shape[d]->is_const_int() || !p->shape[d]->is_const_int() ||
        c->shape[d]->int_value != p->shape[d]->int_value) {
      return false;
    }
  }
  bool any = false, all = true;
  ir::visit_expr(c->op->body, [&](const Expr& e) {
    if (e->kind != ir::ExprKind::kAccess || e->tensor.get() != p.get()) return;
    any = true;
    for (size_t d = 0; d < e->operands.size(); ++d) {
      all = all && e->operands[d].same_as(c->op->axes[d].var);
    }
  });
  return any && all;
}

}  // namespace

LayoutMap propagate_layouts(const std::vector<Tensor>& outputs, LayoutMap layouts) {
  const std::vector<Tensor> computes = ir::collect_dag(outputs).computes;
  for (bool changed = true; changed;) {
    changed = false;
    for (const Tensor& c : computes) {
      for (const Tensor& p : ir::direct_inputs(c)) {
        if (p->is_placeholder() || !reads_in_place(c, p)) continue;
        const bool c_laid = layouts.count(c->name) > 0, p_laid = layouts.count(p->name) > 0;
        if (c_laid == p_laid) continue;
        const Layout& from = c_laid ? layouts.at(c->name) : layouts.at(p->name);
        layouts.emplace(c_laid ? p->name : c->name, from);
        changed = true;
      }
    }
  }
  return layouts;
}

}  // namespace tessera::layout
