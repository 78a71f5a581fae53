#include "ir/functor.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tessera::ir {

Expr ExprMutator::mutate_children(const Expr& e) {
  if (e->operands.empty()) return e;
  std::vector<Expr> ops;
  ops.reserve(e->operands.size());
  bool changed = false;
  for (const Expr& o : e->operands) {
    ops.push_back(mutate(o));
    changed |= !ops.back().same_as(o);
  }
  return changed ? with_operands(e, std::move(ops)) : e;
}

void visit_expr(const Expr& e, const std::function<void(const Expr&)>& f) {
  std::vector<Expr> stack{e};
  while (!stack.empty()) {
    Expr cur = stack.back();
    stack.pop_back();
    f(cur);
    for (auto it = cur->operands.rbegin(); it != cur->operands.rend(); ++it) stack.push_back(*it);
  }
}

namespace {
class Substituter : public ExprMutator {
 public:
  explicit Substituter(const VarMap& vmap) : vmap_(vmap) {}
  Expr mutate(const Expr& e) override {
    if (e->kind == ExprKind::kVar) {
      auto it = vmap_.find(e.get());
      return it == vmap_.end() ? e : it->second;
    }
    return mutate_children(e);
  }

 private:
  const VarMap& vmap_;
};
}  // namespace

Expr substitute(const Expr& e, const VarMap& vmap) {
  if (vmap.empty()) return e;
  Substituter s(vmap);
  return s.mutate(e);
}

bool uses_var(const Expr& e, const Var& v) {
  bool found = false;
  visit_expr(e, [&](const Expr& x) { found |= x.get() == v.get(); });
  return found;
}

bool reads_memory(const Expr& e) {
  std::unordered_set<const ExprNode*> seen;
  std::vector<const ExprNode*> stack{e.get()};
  while (!stack.empty()) {
    const ExprNode* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (n->kind == ExprKind::kAccess || n->kind == ExprKind::kLoad) return true;
    for (const Expr& o : n->operands) stack.push_back(o.get());
  }
  return false;
}

std::vector<Var> free_vars(const Expr& e) {
  std::vector<Var> out;
  std::unordered_set<const ExprNode*> seen;
  visit_expr(e, [&](const Expr& x) {
    if (x->kind == ExprKind::kVar && seen.insert(x.get()).second) out.push_back(x);
  });
  return out;
}

TreeSize tree_size(const Expr& e, const std::function<TreeSize(const ExprNode&)>& access_extra) {
  std::unordered_map<const ExprNode*, TreeSize> done;
  // Post-order over the DAG: a node is finished once all its operands are.
  std::vector<std::pair<const ExprNode*, bool>> stack{{e.get(), false}};
  while (!stack.empty()) {
    auto [node, expanded] = stack.back();
    stack.pop_back();
    if (done.count(node)) continue;
    if (!expanded) {
      stack.push_back({node, true});
      for (const Expr& o : node->operands) {
        if (!done.count(o.get())) stack.push_back({o.get(), false});
      }
      continue;
    }
    TreeSize s{1, 1};
    for (const Expr& o : node->operands) {
      const TreeSize& c = done.at(o.get());
      s.depth = std::max(s.depth, c.depth + 1);
      s.nodes = std::min(kTreeSizeLimit, s.nodes + c.nodes);
    }
    if (node->kind == ExprKind::kAccess && access_extra) {
      const TreeSize extra = access_extra(*node);
      s.depth = std::min(kTreeSizeLimit, std::max(s.depth, extra.depth + 1));
      s.nodes = std::min(kTreeSizeLimit, s.nodes + extra.nodes);
    }
    s.depth = std::min(kTreeSizeLimit, s.depth);
    done[node] = s;
  }
  return done.at(e.get());
}

}  // namespace tessera::ir
