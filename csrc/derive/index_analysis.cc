#include "derive/index_analysis.h"

#include "ir/linear_form.h"
#include "ir/tensor.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;

int64_t AffineIndex::coef(const ir::ExprNode* v) const {
  for (const auto& [var, c] : terms) {
    if (var.get() == v) return c;
  }
  return 0;
}

std::optional<AffineIndex> affine_index(const Expr& e) {
  ir::LinearForm f = ir::to_linear(e);
  if (f.invalid) return std::nullopt;
  AffineIndex out;
  out.constant = f.constant;
  for (const ir::LinearTerm& t : f.terms) {
    if (t.atoms.size() != 1 || t.atoms[0]->kind != ExprKind::kVar) return std::nullopt;
    out.terms.push_back({t.atoms[0], t.coef});
  }
  return out;
}

ir::ConstIntBound index_bound(const Expr& e, const ir::BoundMap* extra) {
  return ir::const_int_bound(e, extra);
}

namespace {

// Whether dimension `d` of the access is inside ([0, dim)) or outside the shape for all values.
enum class DimFit { kInside, kOutside, kUnknown };

DimFit dim_fit(const Expr& access, size_t d, const ir::BoundMap* extra) {
  const Expr& dim = access->tensor->shape[d];
  if (!dim->is_const_int()) return DimFit::kUnknown;
  const ir::ConstIntBound b = index_bound(access->operands[d], extra);
  const int64_t n = dim->int_value;
  if (b.lo != ir::kNoLowerBound && b.hi != ir::kNoUpperBound && b.lo >= 0 && b.hi < n) {
    return DimFit::kInside;
  }
  if ((b.hi != ir::kNoUpperBound && b.hi < 0) || (b.lo != ir::kNoLowerBound && b.lo >= n)) {
    return DimFit::kOutside;
  }
  return DimFit::kUnknown;
}

}  // namespace

bool reads_in_bounds(const Expr& access, const ir::BoundMap* extra) {
  for (size_t d = 0; d < access->operands.size(); ++d) {
    if (dim_fit(access, d, extra) != DimFit::kInside) return false;
  }
  return true;
}

bool reads_out_of_bounds(const Expr& access, const ir::BoundMap* extra) {
  for (size_t d = 0; d < access->operands.size(); ++d) {
    if (dim_fit(access, d, extra) == DimFit::kOutside) return true;
  }
  return false;
}

bool provably_zero(const Expr& body, const ir::BoundMap* extra) {
  switch (body->kind) {
    case ExprKind::kFloatImm:
      return body->float_value == 0.0;
    case ExprKind::kIntImm:
      return body->int_value == 0;
    case ExprKind::kAccess:
      return body->tensor->pad_value == 0.0 && reads_out_of_bounds(body, extra);
    case ExprKind::kMul:
      return provably_zero(body->operands[0], extra) || provably_zero(body->operands[1], extra);
    case ExprKind::kCast:
      return provably_zero(body->operands[0], extra);
    case ExprKind::kSub:  // 0 - x (negation) is 0 when x is
      return body->operands[0]->is_const() && provably_zero(body->operands[0], extra) &&
             provably_zero(body->operands[1], extra);
    default:
      return false;
  }
}

}  // namespace tessera::derive
