#include "loop/guard_division.h"

#include "ir/functor.h"
#include "ir/simplify.h"
#include "loop/stmt_functor.h"

namespace tessera::loop {

namespace {

// Divisors of integer floordiv/floormod in `e` that may be zero.
void collect_risky_divisors(const Expr& e, std::vector<Expr>& out) {
  if (!e.defined()) return;
  ir::visit_expr(e, [&](const Expr& x) {
    if (x->kind != ir::ExprKind::kFloorDiv && x->kind != ir::ExprKind::kFloorMod) return;
    if (!ir::is_int(x->dtype) && x->dtype != ir::DType::kBool) return;
    const Expr& d = x->operands[1];
    const ir::ConstIntBound b = ir::const_int_bound(d);
    if (b.lo > 0 || b.hi < 0) return;  // provably non-zero
    out.push_back(d);
  });
}

// Puts the check for a statement's own divisions in front of it: a statement's expressions are
// evaluated before anything below it runs, so the flag is set before any of those divisions.
class DivisionGuard : public StmtMutator {
 public:
  explicit DivisionGuard(Buffer status) : status_(std::move(status)) {}
  bool guarded() const { return guarded_; }

  Stmt mutate(const Stmt& s) override {
    if (!s) return s;
    Stmt inner = StmtMutator::mutate(s);
    // A prefetch's index is left out: it is a hint, computed for elements the kernel may never
    // read.
    if (s->kind == StmtKind::kPrefetch) return inner;
    std::vector<Expr> divisors;
    for_each_own_expr(s, [&](const Expr& e) { collect_risky_divisors(e, divisors); });
    if (divisors.empty()) return inner;
    guarded_ = true;
    Expr any_zero = ir::bool_imm(false);
    for (const Expr& d : divisors) {
      any_zero = ir::logical_or(any_zero, ir::eq(d, ir::make_const(d->dtype, 0)));
    }
    Stmt flag = make_store(status_, ir::int_imm(0), ir::int_imm(1, ir::DType::kInt32));
    return make_seq({make_if(any_zero, flag), inner});
  }

 private:
  Buffer status_;
  bool guarded_ = false;
};

}  // namespace

LoweredFunc guard_integer_division(LoweredFunc f) {
  if (f.has_status) return f;
  Buffer status = ir::make_buffer(LoweredFunc::kStatusArg, ir::DType::kInt32, {ir::int_imm(1)},
                                  ir::MemScope::kGlobal);
  DivisionGuard guard(status);
  Stmt body = guard.mutate(f.body);
  if (!guard.guarded()) return f;
  f.body = body;
  f.args.push_back(status);
  f.has_status = true;
  return f;
}

}  // namespace tessera::loop
