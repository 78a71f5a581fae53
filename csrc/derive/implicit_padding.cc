#include "derive/implicit_padding.h"

#include <optional>
#include <vector>

#include "ir/functor.h"
#include "ir/linear_form.h"
#include "ir/simplify.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;

namespace {

bool is_zero(const Expr& e) {
  return (e->kind == ExprKind::kFloatImm && e->float_value == 0.0) ||
         (e->is_const_int() && e->int_value == 0);
}

// Reads that are factors of `e`: e is 0 wherever one of them reads outside a 0-padded tensor.
void factor_reads(const Expr& e, std::vector<Expr>* out) {
  switch (e->kind) {
    case ExprKind::kAccess:
      if (e->tensor->pad_value == 0.0) out->push_back(e);
      return;
    case ExprKind::kMul:
      factor_reads(e->operands[0], out);
      factor_reads(e->operands[1], out);
      return;
    case ExprKind::kCast:
      factor_reads(e->operands[0], out);
      return;
    case ExprKind::kSub:  // 0 - x: the frontend's negation
      if (is_zero(e->operands[0])) factor_reads(e->operands[1], out);
      return;
    default:
      return;
  }
}

// An integer comparison as e >= 0 (nullopt for other conditions).
std::optional<Expr> as_nonnegative(const Expr& c) {
  if (c->operands.size() != 2 || !ir::is_int(c->operands[0]->dtype)) return std::nullopt;
  const Expr& a = c->operands[0];
  const Expr& b = c->operands[1];
  switch (c->kind) {
    case ExprKind::kGE:
      return ir::simplify(a - b);
    case ExprKind::kGT:
      return ir::simplify(a - b - ir::int_imm(1));
    case ExprKind::kLE:
      return ir::simplify(b - a);
    case ExprKind::kLT:
      return ir::simplify(b - a - ir::int_imm(1));
    default:
      return std::nullopt;
  }
}

// c >= 0 failing puts `read` outside its tensor along some dimension.
bool bounds_a_read(const Expr& e, const std::vector<Expr>& reads) {
  for (const Expr& r : reads) {
    for (size_t d = 0; d < r->operands.size(); ++d) {
      const Expr& idx = r->operands[d];
      const Expr& dim = r->tensor->shape[d];
      if (ir::expr_equal(ir::simplify(idx - e), ir::int_imm(0))) return true;
      if (dim->is_const_int() &&
          ir::expr_equal(ir::simplify(ir::int_imm(dim->int_value - 1) - idx - e), ir::int_imm(0))) {
        return true;
      }
    }
  }
  return false;
}

// Every conjunct of `c` bounds one of `reads`.
bool guards_reads(const Expr& c, const std::vector<Expr>& reads) {
  if (c->kind == ExprKind::kAnd) {
    return guards_reads(c->operands[0], reads) && guards_reads(c->operands[1], reads);
  }
  const std::optional<Expr> e = as_nonnegative(c);
  return e && bounds_a_read(*e, reads);
}

class DropReadGuards : public ir::ExprMutator {
 public:
  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ExprKind::kSelect || !is_zero(m->operands[2])) return m;
    std::vector<Expr> reads;
    factor_reads(m->operands[1], &reads);
    return guards_reads(m->operands[0], reads) ? m->operands[1] : m;
  }
};

}  // namespace

State implicit_padding(const State& s) {
  State out = map_bodies(
      s, [](const ir::Tensor&, const Expr& body) { return DropReadGuards().mutate(body); },
      "implicit_padding");
  out.trace = s.trace;  // the same program in another form, not a derivation step
  return out;
}

}  // namespace tessera::derive
