#include "layout/relayout.h"

#include <set>
#include <unordered_map>

#include "ir/functor.h"
#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::layout {

using ir::Expr;
using ir::ExprKind;
using ir::IterVar;
using ir::Tensor;
using ir::TensorNode;

namespace {

// Reads retargeted to the rebuilt DAG: a read of a relaid tensor goes through its forward map,
// a read of a rebuilt one (same shape) keeps its indices. Indices are simplified with the
// iterators' bounds, which is where S_X(S_Y^-1(L')) collapses back to plain iterators.
class RetargetReads : public ir::ExprMutator {
 public:
  RetargetReads(const std::unordered_map<const TensorNode*, Tensor>& rebuilt,
                const std::unordered_map<const TensorNode*, const Layout*>& laid)
      : rebuilt_(rebuilt), laid_(laid) {}

  Expr mutate(const Expr& e) override {
    if (e->kind != ExprKind::kAccess) return mutate_children(e);
    std::vector<Expr> idx;
    for (const Expr& i : e->operands) idx.push_back(mutate(i));
    auto r = rebuilt_.find(e->tensor.get());
    auto l = laid_.find(e->tensor.get());
    if (l != laid_.end()) idx = l->second->forward(idx);
    for (Expr& i : idx) i = ir::simplify(i);
    return ir::access(r != rebuilt_.end() ? r->second : e->tensor, idx);
  }

 private:
  const std::unordered_map<const TensorNode*, Tensor>& rebuilt_;
  const std::unordered_map<const TensorNode*, const Layout*>& laid_;
};

// Reads of rebuilt tensors retargeted to their rebuilt nodes, indices untouched.
class RenameReads : public ir::ExprMutator {
 public:
  explicit RenameReads(const std::unordered_map<const TensorNode*, Tensor>& rebuilt)
      : rebuilt_(rebuilt) {}

  Expr mutate(const Expr& e) override {
    if (e->kind != ExprKind::kAccess) return mutate_children(e);
    Expr m = mutate_children(e);
    auto r = rebuilt_.find(e->tensor.get());
    return r == rebuilt_.end() ? m : ir::access(r->second, m->operands);
  }

 private:
  const std::unordered_map<const TensorNode*, Tensor>& rebuilt_;
};

// Simplifies every access index of `e` (after a substitution of iterators).
class SimplifyIndices : public ir::ExprMutator {
 public:
  Expr mutate(const Expr& e) override {
    if (e->kind != ExprKind::kAccess) return mutate_children(e);
    std::vector<Expr> idx;
    for (const Expr& i : e->operands) idx.push_back(ir::simplify(mutate(i)));
    return ir::access(e->tensor, idx);
  }
};

Expr simplify_indices(const Expr& e) { return SimplifyIndices().mutate(e); }

// The divisors f of every `r / f` and `r % f` (constant f > 1) in `e`.
std::set<int64_t> divisors_of(const Expr& e, const Expr& r) {
  std::set<int64_t> fs;
  ir::visit_expr(e, [&](const Expr& n) {
    if ((n->kind == ExprKind::kFloorDiv || n->kind == ExprKind::kFloorMod) &&
        n->operands[0].same_as(r) && n->operands[1]->is_const_int() &&
        n->operands[1]->int_value > 1) {
      fs.insert(n->operands[1]->int_value);
    }
  });
  return fs;
}

// Splits summation iterators that the body divides by one constant dividing their extent.
void split_divided_reduce_axes(std::vector<IterVar>* reduce_axes, Expr* body) {
  std::vector<IterVar> out;
  for (const IterVar& r : *reduce_axes) {
    const std::set<int64_t> fs = divisors_of(*body, r.var);
    const bool const_extent = r.extent->is_const_int();
    if (fs.size() != 1 || !const_extent || r.extent->int_value % *fs.begin() != 0) {
      out.push_back(r);
      continue;
    }
    const int64_t f = *fs.begin();
    IterVar ro = ir::make_iter_var(r.var->name + "_o", ir::int_imm(r.extent->int_value / f));
    IterVar ri = ir::make_iter_var(r.var->name + "_i", ir::int_imm(f));
    *body =
        simplify_indices(ir::substitute(*body, {{r.var.get(), ro.var * ir::int_imm(f) + ri.var}}));
    out.push_back(ro);
    out.push_back(ri);
  }
  *reduce_axes = std::move(out);
}

std::vector<IterVar> physical_axes(const Layout& layout) {
  std::vector<IterVar> axes;
  const std::vector<int64_t>& shape = layout.physical_shape();
  for (size_t d = 0; d < shape.size(); ++d) {
    axes.push_back(ir::make_iter_var("l" + std::to_string(d), ir::int_imm(shape[d])));
  }
  return axes;
}

std::vector<Expr> vars_of(const std::vector<IterVar>& axes) {
  std::vector<Expr> v;
  for (const IterVar& a : axes) v.push_back(a.var);
  return v;
}

// `t`'s body moved onto the physical iterators `axes` of `layout`, with its reads retargeted.
// The iterators are substituted before the reads are rewritten, so a read's forward map sees
// the physical iterators (an unfolded input read by a tiled output picks the tile's own copy).
Expr body_over_physical(const Tensor& t, const Layout& layout, const std::vector<IterVar>& axes,
                        RetargetReads* retarget) {
  const std::vector<Expr> logical = layout.inverse(vars_of(axes));
  ir::VarMap vmap;
  for (size_t d = 0; d < t->op->axes.size(); ++d) {
    vmap[t->op->axes[d].var.get()] = ir::simplify(logical[d]);
  }
  Expr moved = retarget->mutate(simplify_indices(ir::substitute(t->op->body, vmap)));
  if (layout.is_dense()) return moved;
  // A position holding no element computes what a reduction over nothing would, or 0.
  const Expr empty = t->op->reduce == ir::ReduceKind::kNone
                         ? ir::make_const(moved->dtype, t->pad_value)
                         : ir::reduce_identity(t->op->reduce, moved->dtype);
  return ir::select(layout.holds_element(vars_of(axes)), moved, empty);
}

}  // namespace

std::vector<int64_t> constant_shape(const Tensor& t) {
  std::vector<int64_t> shape;
  for (const Expr& e : t->shape) {
    TESSERA_CHECK(e->is_const_int())
        << "layout: tensor " << t->name << " has a symbolic dim; layouts need constant shapes";
    shape.push_back(e->int_value);
  }
  return shape;
}

namespace {

// The DAG's tensors by name; a name two tensors share maps to null (it names neither).
std::map<std::string, Tensor> tensors_by_name(const std::vector<Tensor>& outputs,
                                              const std::vector<Tensor>& inputs) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  std::map<std::string, Tensor> by_name;
  for (const std::vector<Tensor>* ts : {&dag.placeholders, &dag.computes, &inputs}) {
    for (const Tensor& t : *ts) {
      auto [it, fresh] = by_name.emplace(t->name, t);
      if (!fresh && it->second.get() != t.get()) it->second = nullptr;
    }
  }
  return by_name;
}

const Tensor& named(const std::map<std::string, Tensor>& by_name, const std::string& name) {
  auto it = by_name.find(name);
  TESSERA_CHECK(it != by_name.end()) << "layout: no tensor named " << name << " in the DAG";
  TESSERA_CHECK(it->second != nullptr)
      << "layout: " << name << " names more than one tensor of the DAG";
  return it->second;
}

}  // namespace

LayoutMap parse_layouts(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                        const std::map<std::string, std::string>& texts) {
  const std::map<std::string, Tensor> by_name = tensors_by_name(outputs, inputs);
  LayoutMap m;
  for (const auto& [name, text] : texts) {
    m.emplace(name, Layout::parse(constant_shape(named(by_name, name)), text));
  }
  return m;
}

Relaid apply_layouts(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                     const LayoutMap& layouts) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  const std::map<std::string, Tensor> by_name = tensors_by_name(outputs, inputs);
  std::unordered_map<const TensorNode*, const Layout*> laid;
  for (const auto& [name, layout] : layouts) {
    const Tensor& t = named(by_name, name);
    TESSERA_CHECK(constant_shape(t) == layout.logical_shape())
        << "layout: " << layout.to_string() << " is for another shape than " << name << "'s";
    laid[t.get()] = &layout;
  }

  std::unordered_map<const TensorNode*, Tensor> rebuilt;
  auto relay_placeholder = [&](const Tensor& p) {
    auto l = laid.find(p.get());
    if (l == laid.end() || rebuilt.count(p.get())) return;
    std::vector<Expr> shape;
    for (int64_t e : l->second->physical_shape()) shape.push_back(ir::int_imm(e));
    rebuilt[p.get()] = ir::placeholder(p->name, shape, p->dtype);
  };
  for (const Tensor& p : dag.placeholders) relay_placeholder(p);
  for (const Tensor& p : inputs) relay_placeholder(p);

  for (const Tensor& t : dag.computes) {
    RetargetReads retarget(rebuilt, laid);
    std::vector<IterVar> axes = t->op->axes, reduce_axes = t->op->reduce_axes;
    auto l = laid.find(t.get());
    const Layout* layout = l != laid.end() ? l->second : nullptr;
    Expr body;
    if (layout) {
      axes = physical_axes(*layout);
      body = body_over_physical(t, *layout, axes, &retarget);
    } else {
      body = retarget.mutate(t->op->body);
    }
    if (!layout && body.same_as(t->op->body)) continue;  // reads nothing relaid: unchanged
    split_divided_reduce_axes(&reduce_axes, &body);
    Tensor r = ir::with_definition(t, axes, reduce_axes, body);
    rebuilt[t.get()] = layout ? ir::with_attrs(r, {{"layout", layout->to_string()}}) : r;
  }

  auto pick = [&](const Tensor& t) {
    auto r = rebuilt.find(t.get());
    return r != rebuilt.end() ? r->second : t;
  };
  Relaid out;
  for (const Tensor& t : outputs) out.outputs.push_back(pick(t));
  for (const Tensor& t : inputs) out.inputs.push_back(pick(t));
  return out;
}

Relaid uniquely_named(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  std::set<std::string> used;
  for (const std::vector<Tensor>* ts : {&dag.placeholders, &dag.computes}) {
    for (const Tensor& t : *ts) used.insert(t->name);
  }
  std::set<std::string> seen;
  std::unordered_map<const TensorNode*, Tensor> rebuilt;
  for (const Tensor& t : dag.computes) {
    const Expr body = RenameReads(rebuilt).mutate(t->op->body);
    std::string name = t->name;
    for (int k = 1; seen.count(name); ++k) {
      const std::string next = t->name + "_" + std::to_string(k);
      if (!used.count(next)) name = next;
    }
    seen.insert(name);
    if (name == t->name && body.same_as(t->op->body)) continue;  // unchanged
    auto op = std::make_shared<ir::ComputeOpNode>(*t->op);
    op->name = name;
    op->body = body;
    auto n = std::make_shared<TensorNode>(*t);
    n->name = name;
    n->op = op;
    rebuilt[t.get()] = n;
  }
  Relaid out;
  auto pick = [&](const Tensor& t) {
    auto r = rebuilt.find(t.get());
    return r != rebuilt.end() ? r->second : t;
  };
  for (const Tensor& t : outputs) out.outputs.push_back(pick(t));
  for (const Tensor& t : inputs) out.inputs.push_back(pick(t));
  return out;
}

Tensor to_physical(const Tensor& t, const Layout& layout, const std::string& name) {
  TESSERA_CHECK(constant_shape(t) == layout.logical_shape())
      << "layout: " << layout.to_string() << " is for another shape than " << t->name << "'s";
  auto op = std::make_shared<ir::ComputeOpNode>();
  op->name = name;
  op->axes = physical_axes(layout);
  const std::vector<Expr> p = vars_of(op->axes);
  std::vector<Expr> logical;
  for (const Expr& e : layout.inverse(p)) logical.push_back(ir::simplify(e));
  Expr read = ir::access(t, logical);
  op->body = layout.is_dense()
                 ? read
                 : ir::select(layout.holds_element(p), read, ir::make_const(t->dtype, 0.0));
  op->tag = "layout_conversion";
  op->attrs["layout"] = layout.to_string();
  return ir::make_tensor(name, op, t->dtype);
}

Tensor to_logical(const Tensor& physical, const Layout& layout, const std::string& name) {
  TESSERA_CHECK(constant_shape(physical) == layout.physical_shape())
      << "layout: " << physical->name << " is not stored in " << layout.to_string();
  std::vector<Expr> shape;
  for (int64_t e : layout.logical_shape()) shape.push_back(ir::int_imm(e));
  return ir::compute(
      name, shape,
      [&](const std::vector<ir::Var>& i) {
        std::vector<Expr> p;
        for (const Expr& e : layout.forward({i.begin(), i.end()})) p.push_back(ir::simplify(e));
        return ir::access(physical, p);
      },
      "layout_conversion");
}

}  // namespace tessera::layout
