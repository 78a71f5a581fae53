#include "loop/simplify_stmt.h"

#include "ir/functor.h"

namespace tessera::loop {

namespace {

bool is_nop(const Stmt& s) { return !s || s->kind == StmtKind::kNop; }

bool is_gpu_bound(ForKind k) {
  return k == ForKind::kGpuBlockX || k == ForKind::kGpuBlockY || k == ForKind::kGpuBlockZ ||
         k == ForKind::kGpuThreadX || k == ForKind::kGpuThreadY || k == ForKind::kGpuThreadZ;
}

class StmtSimplifier {
 public:
  explicit StmtSimplifier(ir::BoundMap bounds) : bounds_(std::move(bounds)) {}

  Stmt visit(const Stmt& s) {
    if (!s) return s;
    switch (s->kind) {
      case StmtKind::kFor:
        return visit_for(s);
      case StmtKind::kLet:
        return visit_let(s);
      case StmtKind::kIf:
        return visit_if(s);
      case StmtKind::kStore:
        return make_store(s->buffer, expr(s->index), expr(s->value));
      case StmtKind::kPrefetch:
        return make_prefetch(s->buffer, expr(s->index), s->cache_level);
      case StmtKind::kAllocate: {
        Stmt body = visit(s->body);
        return is_nop(body) ? make_nop() : make_allocate(s->buffer, body);
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> out;
        out.reserve(s->seq.size());
        for (const Stmt& c : s->seq) out.push_back(visit(c));
        return make_seq(std::move(out));
      }
      case StmtKind::kNop:
        return s;
    }
    return s;
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

  Stmt visit_for(const Stmt& s) {
    Expr min = expr(s->min), extent = expr(s->extent);
    ir::ConstIntBound be = bound(extent);
    const bool gpu = is_gpu_bound(s->for_kind);
    if (be.hi <= 0 && !gpu) return make_nop();
    if (be.lo == 1 && be.hi == 1 && !gpu) {
      // Runs exactly once with var == min.
      if (min->kind == ir::ExprKind::kIntImm || min->kind == ir::ExprKind::kVar) {
        return with_substitution(s->var, min, [&] { return visit(s->body); });
      }
      return visit_let(make_let(s->var, min, s->body), /*value_simplified=*/true);
    }
    ir::ConstIntBound bmin = bound(min);
    ir::ConstIntBound blast =
        bound(expr(ir::sub(ir::add(min, extent), ir::int_imm(1, extent->dtype))));
    Stmt body =
        with_bound(s->var, ir::ConstIntBound{bmin.lo, blast.hi}, [&] { return visit(s->body); });
    if (is_nop(body)) return make_nop();
    return make_for(s->var, min, extent, s->for_kind, body);
  }

  Stmt visit_let(const Stmt& s, bool value_simplified = false) {
    Expr value = value_simplified ? s->value : expr(s->value);
    if (value->kind == ir::ExprKind::kIntImm || value->kind == ir::ExprKind::kVar) {
      return with_substitution(s->var, value, [&] { return visit(s->body); });
    }
    ir::ConstIntBound bv = ir::is_int(value->dtype) ? bound(value) : ir::ConstIntBound{};
    Stmt body = with_bound(s->var, bv, [&] { return visit(s->body); });
    if (is_nop(body)) return make_nop();
    return make_let(s->var, value, body);
  }

  Stmt visit_branch(const Stmt& s, const Expr& cond, bool holds) {
    if (!s) return s;
    ir::BoundMap saved = bounds_;
    ir::refine_bounds(cond, holds, &bounds_);
    Stmt r = visit(s);
    bounds_ = std::move(saved);
    return r;
  }

  Stmt visit_if(const Stmt& s) {
    Expr cond = expr(s->cond);
    if (cond->kind == ir::ExprKind::kIntImm) {
      Stmt taken = cond->int_value ? s->then_case : s->else_case;
      return taken ? visit(taken) : make_nop();
    }
    Stmt then_case = visit_branch(s->then_case, cond, true);
    Stmt else_case = visit_branch(s->else_case, cond, false);
    if (is_nop(else_case)) else_case = nullptr;
    if (is_nop(then_case)) {
      if (!else_case) return make_nop();
      return make_if(ir::simplify(ir::logical_not(cond), &bounds_), else_case);
    }
    return make_if(cond, then_case, else_case);
  }

  ir::BoundMap bounds_;
  ir::VarMap subst_;
};

}  // namespace

Stmt simplify_stmt(const Stmt& s) { return simplify_stmt(s, ir::BoundMap{}); }

Stmt simplify_stmt(const Stmt& s, const ir::BoundMap& bounds) {
  StmtSimplifier simplifier(bounds);
  return simplifier.visit(s);
}

}  // namespace tessera::loop
