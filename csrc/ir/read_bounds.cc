#include "ir/read_bounds.h"

#include "ir/const_bound.h"
#include "ir/linear_form.h"
#include "ir/printer.h"
#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::ir {

namespace {

// An index that is a sum of iterators times constants plus a constant.
bool is_affine_in_vars(const Expr& index) {
  const LinearForm f = to_linear(index);
  if (f.invalid) return false;
  for (const LinearTerm& t : f.terms) {
    if (t.atoms.size() != 1 || t.atoms[0]->kind != ExprKind::kVar) return false;
  }
  return true;
}

void check_access(const Tensor& reader, const Expr& access) {
  const Tensor& t = access->tensor;
  for (size_t d = 0; d < access->operands.size(); ++d) {
    const Expr& dim = t->shape[d];
    const Expr& index = access->operands[d];
    if (!dim->is_const_int() || !is_affine_in_vars(index)) continue;
    const ConstIntBound b = const_int_bound(index);
    if (!is_finite_lo(b.lo) || !is_finite_hi(b.hi)) continue;
    TESSERA_CHECK(b.lo >= 0 && b.hi < dim->int_value)
        << reader->name << " reads " << t->name << " outside its shape: index " << d << " ("
        << to_string(index) << ") ranges over [" << b.lo << ", " << b.hi << "] but the dim has "
        << "size " << dim->int_value << ". Expressions that rely on reads outside a shape giving "
        << "0 (EinNet form, _C.derive_expr) compile through _C.derive or tessera.op(..., "
        << "derive=True); otherwise clamp the index under a select";
  }
}

// Visits the reads of `e` that always execute: the branches of a select are guarded by its
// condition, so only the condition is searched below one.
void check_unguarded(const Tensor& reader, const Expr& e) {
  if (e->kind == ExprKind::kSelect) {
    check_unguarded(reader, e->operands[0]);
    return;
  }
  if (e->kind == ExprKind::kAccess) check_access(reader, e);
  for (const Expr& o : e->operands) check_unguarded(reader, o);
}

}  // namespace

void check_reads_within_shapes(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : collect_dag(outputs).computes) check_unguarded(t, t->op->body);
}

}  // namespace tessera::ir
