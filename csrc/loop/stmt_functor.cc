#include "loop/stmt_functor.h"

#include "util/check.h"

namespace tessera::loop {

void for_each_own_expr(const Stmt& s, const std::function<void(const Expr&)>& f) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor:
    case StmtKind::kParallelCall:
      f(s->min);
      f(s->extent);
      return;
    case StmtKind::kLet:
      f(s->value);
      return;
    case StmtKind::kIf:
      f(s->cond);
      return;
    case StmtKind::kStore:
      f(s->index);
      f(s->value);
      return;
    case StmtKind::kPrefetch:
      f(s->index);
      return;
    case StmtKind::kAllocate:
    case StmtKind::kSeq:
    case StmtKind::kNop:
    case StmtKind::kBarrier:
      return;
  }
}

// ---- StmtVisitor ----------------------------------------------------------------------------

void StmtVisitor::visit(const Stmt& s) {
  if (!s) return;
  switch (s->kind) {
    case StmtKind::kFor:
      return visit_for(s);
    case StmtKind::kLet:
      return visit_let(s);
    case StmtKind::kIf:
      return visit_if(s);
    case StmtKind::kStore:
      return visit_store(s);
    case StmtKind::kAllocate:
      return visit_allocate(s);
    case StmtKind::kSeq:
      return visit_seq(s);
    case StmtKind::kNop:
      return visit_nop(s);
    case StmtKind::kPrefetch:
      return visit_prefetch(s);
    case StmtKind::kParallelCall:
      return visit_parallel_call(s);
    case StmtKind::kBarrier:
      return visit_barrier(s);
  }
  TESSERA_FAIL() << "unknown statement kind";
}

void StmtVisitor::visit_for(const Stmt& s) {
  visit_expr(s->min);
  visit_expr(s->extent);
  visit(s->body);
}

void StmtVisitor::visit_let(const Stmt& s) {
  visit_expr(s->value);
  visit(s->body);
}

void StmtVisitor::visit_if(const Stmt& s) {
  visit_expr(s->cond);
  visit(s->then_case);
  visit(s->else_case);
}

void StmtVisitor::visit_store(const Stmt& s) {
  visit_expr(s->index);
  visit_expr(s->value);
}

void StmtVisitor::visit_allocate(const Stmt& s) { visit(s->body); }

void StmtVisitor::visit_seq(const Stmt& s) {
  for (const Stmt& c : s->seq) visit(c);
}

void StmtVisitor::visit_prefetch(const Stmt& s) { visit_expr(s->index); }

void StmtVisitor::visit_parallel_call(const Stmt& s) {
  visit_expr(s->min);
  visit_expr(s->extent);
}

// ---- StmtMutator ----------------------------------------------------------------------------

namespace {
bool same(const Stmt& a, const Stmt& b) { return a.get() == b.get(); }
bool same(const Expr& a, const Expr& b) { return a.same_as(b); }
}  // namespace

Stmt StmtMutator::mutate(const Stmt& s) {
  if (!s) return s;
  switch (s->kind) {
    case StmtKind::kFor:
      return mutate_for(s);
    case StmtKind::kLet:
      return mutate_let(s);
    case StmtKind::kIf:
      return mutate_if(s);
    case StmtKind::kStore:
      return mutate_store(s);
    case StmtKind::kAllocate:
      return mutate_allocate(s);
    case StmtKind::kSeq:
      return mutate_seq(s);
    case StmtKind::kNop:
      return mutate_nop(s);
    case StmtKind::kPrefetch:
      return mutate_prefetch(s);
    case StmtKind::kParallelCall:
      return mutate_parallel_call(s);
    case StmtKind::kBarrier:
      return mutate_barrier(s);
  }
  TESSERA_FAIL() << "unknown statement kind";
}

Stmt StmtMutator::mutate_for(const Stmt& s) {
  Expr min = mutate_expr(s->min);
  Expr extent = mutate_expr(s->extent);
  Stmt body = mutate(s->body);
  if (same(min, s->min) && same(extent, s->extent) && same(body, s->body)) return s;
  return make_for(s->var, min, extent, s->for_kind, body);
}

Stmt StmtMutator::mutate_let(const Stmt& s) {
  Expr value = mutate_expr(s->value);
  Stmt body = mutate(s->body);
  if (same(value, s->value) && same(body, s->body)) return s;
  return make_let(s->var, value, body);
}

Stmt StmtMutator::mutate_if(const Stmt& s) {
  Expr cond = mutate_expr(s->cond);
  Stmt then_case = mutate(s->then_case);
  Stmt else_case = mutate(s->else_case);
  if (same(cond, s->cond) && same(then_case, s->then_case) && same(else_case, s->else_case)) {
    return s;
  }
  return make_if(cond, then_case, else_case);
}

Stmt StmtMutator::mutate_store(const Stmt& s) {
  Expr index = mutate_expr(s->index);
  Expr value = mutate_expr(s->value);
  if (same(index, s->index) && same(value, s->value)) return s;
  return make_store(s->buffer, index, value);
}

Stmt StmtMutator::mutate_allocate(const Stmt& s) {
  Stmt body = mutate(s->body);
  return same(body, s->body) ? s : make_allocate(s->buffer, body);
}

Stmt StmtMutator::mutate_seq(const Stmt& s) {
  std::vector<Stmt> seq;
  seq.reserve(s->seq.size());
  bool changed = false;
  for (const Stmt& c : s->seq) {
    seq.push_back(mutate(c));
    changed = changed || !same(seq.back(), c);
  }
  return changed ? make_seq(std::move(seq)) : s;
}

Stmt StmtMutator::mutate_prefetch(const Stmt& s) {
  Expr index = mutate_expr(s->index);
  return same(index, s->index) ? s : make_prefetch(s->buffer, index, s->cache_level);
}

Stmt StmtMutator::mutate_parallel_call(const Stmt& s) {
  Expr min = mutate_expr(s->min);
  Expr extent = mutate_expr(s->extent);
  if (same(min, s->min) && same(extent, s->extent)) return s;
  return make_parallel_call(s->var, min, extent, s->callee);
}

}  // namespace tessera::loop
