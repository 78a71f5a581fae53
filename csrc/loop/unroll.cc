#include "loop/unroll.h"

#include <unordered_map>

#include "ir/functor.h"
#include "ir/simplify.h"
#include "loop/stmt_functor.h"
#include "util/check.h"

namespace tessera::loop {

namespace {

// Integer + - * rebuilt with the folding builders: a copy's indices become constants, or a
// variable part plus one constant, as they read in the loop with its variable fixed.
Expr refold(const Expr& e) {
  if (!ir::is_int(e->dtype)) return e;
  switch (e->kind) {
    case ir::ExprKind::kAdd:
      return ir::add(e->operands[0], e->operands[1]);
    case ir::ExprKind::kSub:
      return ir::sub(e->operands[0], e->operands[1]);
    case ir::ExprKind::kMul:
      return ir::mul(e->operands[0], e->operands[1]);
    default:
      return e;
  }
}

// Substitutes the unrolled variables' current values, keeping shared subexpressions shared.
// The memo is valid for one set of values: clear() whenever they change.
class CopySubstituter : public ir::ExprMutator {
 public:
  explicit CopySubstituter(const ir::VarMap& values) : values_(values) {}
  void clear() { memo_.clear(); }

  Expr mutate(const Expr& e) override {
    if (e->kind == ir::ExprKind::kVar) {
      auto it = values_.find(e.get());
      return it == values_.end() ? e : it->second;
    }
    if (e->operands.empty()) return e;
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    Expr r = mutate_children(e);
    if (!r.same_as(e)) r = refold(r);
    memo_.emplace(e.get(), r);
    return r;
  }

 private:
  const ir::VarMap& values_;
  std::unordered_map<const ir::ExprNode*, Expr> memo_;
};

bool mentions_any(const Expr& e, const ir::VarMap& vars) {
  bool found = false;
  ir::visit_expr(e, [&](const Expr& x) { found = found || vars.count(x.get()) > 0; });
  return found;
}

class Unroller : public StmtMutator {
 public:
  explicit Unroller(std::vector<std::string>* notes) : notes_(notes), subst_(values_) {}

 protected:
  Expr mutate_expr(const Expr& e) override { return values_.empty() ? e : subst_.mutate(e); }

  Stmt mutate_let(const Stmt& s) override {
    Expr value = mutate_expr(s->value);
    Stmt body = unbound(s->var, [&] { return mutate(s->body); });
    if (value.same_as(s->value) && body == s->body) return s;
    return make_let(s->var, value, body);
  }

  Stmt mutate_for(const Stmt& s) override {
    Expr min = mutate_expr(s->min), extent = mutate_expr(s->extent);
    // Extents that became constant only through the values of enclosing unrolled loops.
    if (!extent->is_const_int() && !values_.empty()) {
      Expr folded = ir::simplify(extent);
      if (folded->is_const_int()) extent = folded;
    }
    if (s->for_kind == ForKind::kUnrolled) {
      if (extent->is_const_int() && extent->int_value <= kMaxFullUnroll) {
        return unroll(s, min, extent->int_value);
      }
      notes_->push_back("unrolled loop " + s->var->name + " kept as a loop: " +
                        (extent->is_const_int() ? "extent above " + std::to_string(kMaxFullUnroll)
                                                : std::string("extent is not a constant")));
    }
    Stmt body = unbound(s->var, [&] { return mutate(s->body); });
    const ForKind kind = s->for_kind == ForKind::kUnrolled ? ForKind::kSerial : s->for_kind;
    if (min.same_as(s->min) && extent.same_as(s->extent) && body == s->body &&
        kind == s->for_kind) {
      return s;
    }
    return make_for(s->var, min, extent, kind, body);
  }

  Stmt mutate_allocate(const Stmt& s) override {
    for (const Expr& d : s->buffer->shape) {
      TESSERA_CHECK(!mentions_any(d, values_))
          << "buffer " << s->buffer->name << " is sized by an unrolled loop variable";
    }
    return StmtMutator::mutate_allocate(s);
  }

 private:
  Stmt unroll(const Stmt& s, const Expr& min, int64_t extent) {
    // The variable's value in its own type, as the loop would have computed it.
    const Expr base = min->dtype == s->var->dtype ? min : ir::cast(s->var->dtype, min);
    std::vector<Stmt> copies;
    const Var& var = s->var;
    auto old = values_.find(var.get());
    const Expr saved = old == values_.end() ? Expr() : old->second;
    for (int64_t i = 0; i < extent; ++i) {
      values_[var.get()] = ir::add(base, ir::int_imm(i, s->var->dtype));
      subst_.clear();
      copies.push_back(mutate(s->body));
    }
    restore(var, saved);
    return make_seq(std::move(copies));
  }

  // Runs `f` with `v` (bound again by a for or let) no longer replaced.
  template <typename F>
  Stmt unbound(const Var& v, F f) {
    auto it = values_.find(v.get());
    if (it == values_.end()) return f();
    const Expr saved = it->second;
    values_.erase(it);
    subst_.clear();
    Stmt r = f();
    restore(v, saved);
    return r;
  }

  void restore(const Var& v, const Expr& saved) {
    if (saved.defined()) {
      values_[v.get()] = saved;
    } else {
      values_.erase(v.get());
    }
    subst_.clear();
  }

  std::vector<std::string>* notes_;
  ir::VarMap values_;  // unrolled variable -> its value in the copy being written
  CopySubstituter subst_;
};

}  // namespace

Stmt unroll_loops(const Stmt& s, std::vector<std::string>* notes) {
  TESSERA_CHECK(notes != nullptr) << "unroll_loops needs a place for its notes";
  return Unroller(notes).mutate(s);
}

}  // namespace tessera::loop
