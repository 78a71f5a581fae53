#include "loop/stmt_functor.h"

namespace tessera::loop {

Stmt StmtMutator::mutate_children(const Stmt& s) {
  if (!s) return s;
  auto changed = [](const Stmt& a, const Stmt& b) { return a.get() != b.get(); };
  switch (s->kind) {
    case StmtKind::kFor: {
      Stmt body = mutate(s->body);
      return changed(body, s->body) ? make_for(s->var, s->min, s->extent, s->for_kind, body) : s;
    }
    case StmtKind::kLet: {
      Stmt body = mutate(s->body);
      return changed(body, s->body) ? make_let(s->var, s->value, body) : s;
    }
    case StmtKind::kAllocate: {
      Stmt body = mutate(s->body);
      return changed(body, s->body) ? make_allocate(s->buffer, body) : s;
    }
    case StmtKind::kIf: {
      Stmt then_case = mutate(s->then_case);
      Stmt else_case = s->else_case ? mutate(s->else_case) : nullptr;
      return changed(then_case, s->then_case) || changed(else_case, s->else_case)
                 ? make_if(s->cond, then_case, else_case)
                 : s;
    }
    case StmtKind::kSeq: {
      std::vector<Stmt> seq;
      bool any = false;
      for (const Stmt& c : s->seq) {
        seq.push_back(mutate(c));
        any = any || changed(seq.back(), c);
      }
      return any ? make_seq(std::move(seq)) : s;
    }
    case StmtKind::kStore:
    case StmtKind::kNop:
    case StmtKind::kPrefetch:
      return s;
  }
  return s;
}

}  // namespace tessera::loop
