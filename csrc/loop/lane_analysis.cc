#include "loop/lane_analysis.h"

#include <functional>
#include <unordered_set>

namespace tessera::loop {

using ir::Expr;
using ir::ExprKind;
using ir::ExprNode;

bool exact_equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a->kind != b->kind || a->dtype != b->dtype) return false;
  switch (a->kind) {
    case ExprKind::kIntImm:
      return a->int_value == b->int_value;
    case ExprKind::kFloatImm:
      return a->float_value == b->float_value ||
             (a->float_value != a->float_value && b->float_value != b->float_value);
    case ExprKind::kVar:
      return false;  // distinct nodes are distinct variables
    case ExprKind::kCall:
      if (a->call_op != b->call_op) return false;
      break;
    case ExprKind::kLoad:
      if (a->buffer != b->buffer) return false;
      break;
    case ExprKind::kAccess:
      if (a->tensor != b->tensor) return false;
      break;
    default:
      break;
  }
  if (a->operands.size() != b->operands.size()) return false;
  for (size_t i = 0; i < a->operands.size(); ++i) {
    if (!exact_equal(a->operands[i], b->operands[i])) return false;
  }
  return true;
}

namespace {

// Visits each distinct node of a DAG once (ir::visit_expr revisits shared subtrees).
void visit_unique(const Expr& e, std::unordered_set<const ExprNode*>& seen,
                  const std::function<void(const Expr&)>& f) {
  if (!e.defined() || !seen.insert(e.get()).second) return;
  f(e);
  for (const Expr& o : e->operands) visit_unique(o, seen, f);
}

}  // namespace

bool mentions(const Expr& e, const ExprNode* var, const ir::VarMap& defs) {
  bool found = false;
  std::unordered_set<const ExprNode*> seen;
  visit_unique(e, seen, [&](const Expr& x) {
    if (x.get() == var) found = true;
    if (x->kind == ExprKind::kVar) {
      auto it = defs.find(x.get());
      if (it != defs.end() && mentions(it->second, var, defs)) found = true;
    }
  });
  return found;
}

std::optional<int64_t> lane_stride(const Expr& e, const ExprNode* var, const ir::VarMap& defs) {
  if (!mentions(e, var, defs)) return 0;
  switch (e->kind) {
    case ExprKind::kVar: {
      if (e.get() == var) return 1;
      auto it = defs.find(e.get());
      if (it != defs.end()) return lane_stride(it->second, var, defs);
      return std::nullopt;
    }
    case ExprKind::kAdd:
    case ExprKind::kSub: {
      auto a = lane_stride(e->operands[0], var, defs);
      auto b = lane_stride(e->operands[1], var, defs);
      if (!a || !b) return std::nullopt;
      return e->kind == ExprKind::kAdd ? *a + *b : *a - *b;
    }
    case ExprKind::kMul: {
      const Expr& x = e->operands[0];
      const Expr& y = e->operands[1];
      if (x->kind == ExprKind::kIntImm) {
        auto s = lane_stride(y, var, defs);
        if (s) return *s * x->int_value;
      } else if (y->kind == ExprKind::kIntImm) {
        auto s = lane_stride(x, var, defs);
        if (s) return *s * y->int_value;
      }
      return std::nullopt;
    }
    case ExprKind::kCast:
      // Integer widening/narrowing of an affine index keeps its stride (indices never wrap).
      if (ir::is_int(e->dtype) && ir::is_int(e->operands[0]->dtype)) {
        return lane_stride(e->operands[0], var, defs);
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace tessera::loop
