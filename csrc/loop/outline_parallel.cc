#include "loop/outline_parallel.h"

#include <unordered_map>
#include <unordered_set>

#include "loop/stmt_functor.h"

namespace tessera::loop {

namespace {

// Variables and buffers a statement mentions, each once, in first-use order (binders, buffer
// shapes of allocations and a store's buffer included).
class UsedNames : public StmtVisitor {
 public:
  std::vector<Var> vars;
  std::vector<Buffer> buffers;

 protected:
  void visit_expr(const Expr& e) override { add_expr(e); }

  void visit_for(const Stmt& s) override {
    add_expr(s->var);
    StmtVisitor::visit_for(s);
  }
  void visit_let(const Stmt& s) override {
    add_expr(s->var);
    StmtVisitor::visit_let(s);
  }
  void visit_parallel_call(const Stmt& s) override {
    add_expr(s->var);
    StmtVisitor::visit_parallel_call(s);
  }
  void visit_store(const Stmt& s) override {
    add_buffer(s->buffer);
    StmtVisitor::visit_store(s);
  }
  void visit_prefetch(const Stmt& s) override {
    add_buffer(s->buffer);
    StmtVisitor::visit_prefetch(s);
  }
  void visit_allocate(const Stmt& s) override {
    add_buffer(s->buffer);
    for (const Expr& d : s->buffer->shape) add_expr(d);
    StmtVisitor::visit_allocate(s);
  }

 private:
  void add_buffer(const Buffer& b) {
    if (b && seen_buffers_.insert(b.get()).second) buffers.push_back(b);
  }
  // Each distinct node of the DAG once, parents before children.
  void add_expr(const Expr& e) {
    if (!e.defined() || !seen_nodes_.insert(e.get()).second) return;
    if (e->kind == ir::ExprKind::kVar) vars.push_back(e);
    if (e->kind == ir::ExprKind::kLoad) add_buffer(e->buffer);
    for (const Expr& o : e->operands) add_expr(o);
  }

  std::unordered_set<const ir::ExprNode*> seen_nodes_;
  std::unordered_set<const ir::BufferNode*> seen_buffers_;
};

// Turns kParallel loops inside an outlined body into serial loops.
class NestedParallel : public StmtMutator {
 public:
  explicit NestedParallel(std::vector<std::string>* notes) : notes_(notes) {}

 protected:
  Stmt mutate_for(const Stmt& s) override {
    Stmt r = StmtMutator::mutate_for(s);
    if (s->for_kind != ForKind::kParallel) return r;
    notes_->push_back("parallel loop " + s->var->name +
                      " runs serially (nested in a parallel loop)");
    return make_for(r->var, r->min, r->extent, ForKind::kSerial, r->body);
  }

 private:
  std::vector<std::string>* notes_;
};

// Outlines the outermost parallel loops, tracking what is bound around them: the size
// variables, enclosing loop and let variables, the arguments and enclosing allocations.
class Outliner : public StmtMutator {
 public:
  explicit Outliner(LoweredFunc* f) : f_(f) {
    for (const Var& v : f->size_vars) ++vars_in_scope_[v.get()];
    for (const Buffer& b : f->args) ++buffers_in_scope_[b.get()];
  }

 protected:
  Stmt mutate_for(const Stmt& s) override {
    if (s->for_kind == ForKind::kParallel) return outline(s);
    ++vars_in_scope_[s->var.get()];
    Stmt r = StmtMutator::mutate_for(s);
    --vars_in_scope_[s->var.get()];
    return r;
  }

  Stmt mutate_let(const Stmt& s) override {
    ++vars_in_scope_[s->var.get()];
    Stmt r = StmtMutator::mutate_let(s);
    --vars_in_scope_[s->var.get()];
    return r;
  }

  Stmt mutate_allocate(const Stmt& s) override {
    ++buffers_in_scope_[s->buffer.get()];
    Stmt r = StmtMutator::mutate_allocate(s);
    --buffers_in_scope_[s->buffer.get()];
    return r;
  }

 private:
  Stmt outline(const Stmt& s) {
    OutlinedBody o;
    o.name = "par" + std::to_string(f_->outlined.size());
    o.var = s->var;
    o.body = NestedParallel(&f_->notes).mutate(s->body);
    UsedNames used;
    used.visit(o.body);
    for (const Buffer& b : used.buffers) {
      if (bound(buffers_in_scope_, b.get())) o.buffers.push_back(b);
    }
    for (const Var& v : used.vars) {
      if (v.get() != s->var.get() && bound(vars_in_scope_, v.get())) o.vars.push_back(v);
    }
    f_->outlined.push_back(std::move(o));
    return make_parallel_call(s->var, s->min, s->extent, static_cast<int>(f_->outlined.size()) - 1);
  }

  template <typename K>
  static bool bound(const std::unordered_map<K, int>& scope, K key) {
    auto it = scope.find(key);
    return it != scope.end() && it->second > 0;
  }

  LoweredFunc* f_;
  // How many enclosing binders of each name are open (a name may be bound again inside).
  std::unordered_map<const ir::ExprNode*, int> vars_in_scope_;
  std::unordered_map<const ir::BufferNode*, int> buffers_in_scope_;
};

}  // namespace

LoweredFunc outline_parallel_loops(LoweredFunc f) {
  Outliner outliner(&f);
  f.body = outliner.mutate(f.body);
  return f;
}

}  // namespace tessera::loop
