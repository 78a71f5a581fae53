#include "loop/simplify_stmt.h"

#include "ir/functor.h"
#include "loop/stmt_functor.h"

namespace tessera::loop {

namespace {

bool is_nop(const Stmt& s) { return !s || s->kind == StmtKind::kNop; }

class StmtSimplifier : public StmtMutator {
 public:
  explicit StmtSimplifier(ir::BoundMap bounds) : bounds_(std::move(bounds)) {}

 protected:
  Expr mutate_expr(const Expr& e) override { return expr(e); }

  Stmt mutate_allocate(const Stmt& s) override {
    Stmt body = mutate(s->body);
    return is_nop(body) ? make_nop() : make_allocate(s->buffer, body);
  }

  Stmt mutate_for(const Stmt& s) override {
    Expr min = expr(s->min), extent = expr(s->extent);
    ir::ConstIntBound be = bound(extent);
    const bool gpu = is_gpu_bound(s->for_kind);
    if (be.hi <= 0 && !gpu) return make_nop();
    if (be.lo == 1 && be.hi == 1 && !gpu) {
      // Runs exactly once with var == min.
      if (min->kind == ir::ExprKind::kIntImm || min->kind == ir::ExprKind::kVar) {
        return with_substitution(s->var, min, [&] { return mutate(s->body); });
      }
      return simplify_let(make_let(s->var, min, s->body), /*value_simplified=*/true);
    }
    ir::ConstIntBound bmin = bound(min);
    ir::ConstIntBound blast =
        bound(expr(ir::sub(ir::add(min, extent), ir::int_imm(1, extent->dtype))));
    Stmt body =
        with_bound(s->var, ir::ConstIntBound{bmin.lo, blast.hi}, [&] { return mutate(s->body); });
    if (is_nop(body)) return make_nop();
    return make_for(s->var, min, extent, s->for_kind, body);
  }

  Stmt mutate_let(const Stmt& s) override { return simplify_let(s, /*value_simplified=*/false); }

  Stmt mutate_if(const Stmt& s) override {
    Expr cond = expr(s->cond);
    if (cond->kind == ir::ExprKind::kIntImm) {
      Stmt taken = cond->int_value ? s->then_case : s->else_case;
      return taken ? mutate(taken) : make_nop();
    }
    Stmt then_case = mutate_branch(s->then_case, cond, true);
    Stmt else_case = mutate_branch(s->else_case, cond, false);
    if (is_nop(else_case)) else_case = nullptr;
    if (is_nop(then_case)) {
      if (!else_case) return make_nop();
      return make_if(ir::simplify(ir::logical_not(cond), &bounds_), else_case);
    }
    return make_if(cond, then_case, else_case);
  }

 private:
  Expr expr(const Expr& e) {
    if (!e.defined()) return e;
    return ir::simplify(subst_.empty() ? e : ir::substitute(e, subst_), &bounds_);
  }

  ir::ConstIntBound bound(const Expr& e) { return ir::const_int_bound(e, &bounds_); }

  // Runs `f` with `v` bound to `b`, restoring the previous bound afterwards.
  template <typename F>
  Stmt with_bound(const Var& v, ir::ConstIntBound b, F f) {
    auto it = bounds_.find(v.get());
    bool had = it != bounds_.end();
    ir::ConstIntBound old = had ? it->second : ir::ConstIntBound{};
    bounds_[v.get()] = b;
    Stmt r = f();
    if (had) {
      bounds_[v.get()] = old;
    } else {
      bounds_.erase(v.get());
    }
    return r;
  }

  // Runs `f` with `v` replaced by `value` in every expression below.
  template <typename F>
  Stmt with_substitution(const Var& v, const Expr& value, F f) {
    auto it = subst_.find(v.get());
    bool had = it != subst_.end();
    Expr old = had ? it->second : Expr();
    subst_[v.get()] = value;
    Stmt r = f();
    if (had) {
      subst_[v.get()] = old;
    } else {
      subst_.erase(v.get());
    }
    return r;
  }

  Stmt simplify_let(const Stmt& s, bool value_simplified) {
    Expr value = value_simplified ? s->value : expr(s->value);
    if (value->kind == ir::ExprKind::kIntImm || value->kind == ir::ExprKind::kVar) {
      return with_substitution(s->var, value, [&] { return mutate(s->body); });
    }
    ir::ConstIntBound bv = ir::is_int(value->dtype) ? bound(value) : ir::ConstIntBound{};
    Stmt body = with_bound(s->var, bv, [&] { return mutate(s->body); });
    if (is_nop(body)) return make_nop();
    return make_let(s->var, value, body);
  }

  Stmt mutate_branch(const Stmt& s, const Expr& cond, bool holds) {
    if (!s) return s;
    ir::BoundMap saved = bounds_;
    ir::refine_bounds(cond, holds, &bounds_);
    Stmt r = mutate(s);
    bounds_ = std::move(saved);
    return r;
  }

  ir::BoundMap bounds_;
  ir::VarMap subst_;
};

}  // namespace

Stmt simplify_stmt(const Stmt& s) { return simplify_stmt(s, ir::BoundMap{}); }

Stmt simplify_stmt(const Stmt& s, const ir::BoundMap& bounds) {
  StmtSimplifier simplifier(bounds);
  return simplifier.mutate(s);
}

}  // namespace tessera::loop
