#include "derive/state.h"

#include <sstream>
#include <unordered_set>

#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/simplify.h"
#include "ops/reference.h"
#include "util/check.h"

namespace tessera::derive {

using ir::Expr;
using ir::ExprKind;
using ir::Tensor;
using ir::TensorNode;

std::vector<Tensor> scopes(const State& s) { return ir::collect_dag(s.outputs).computes; }

std::vector<Tensor> consumers(const State& s, const Tensor& t) {
  std::vector<Tensor> out;
  for (const Tensor& c : scopes(s)) {
    if (!accesses_of(c->op->body, t).empty()) out.push_back(c);
  }
  return out;
}

bool is_output(const State& s, const Tensor& t) {
  for (const Tensor& o : s.outputs) {
    if (o.get() == t.get()) return true;
  }
  return false;
}

namespace {

// Rewrites reads of replaced tensors (and of tensors already rebuilt) inside one body.
class RetargetAccesses : public ir::ExprMutator {
 public:
  RetargetAccesses(const std::map<const TensorNode*, Replacement>& repl,
                   const std::unordered_map<const TensorNode*, Tensor>& rebuilt)
      : repl_(repl), rebuilt_(rebuilt) {}

  Expr mutate(const Expr& e) override {
    Expr m = mutate_children(e);
    if (m->kind != ExprKind::kAccess) return m;
    const TensorNode* t = m->tensor.get();
    auto r = repl_.find(t);
    if (r != repl_.end()) {
      std::vector<Expr> idx = r->second.reindex ? r->second.reindex(m->operands) : m->operands;
      for (Expr& i : idx) i = ir::simplify(i);
      return ir::access(r->second.tensor, std::move(idx));
    }
    auto b = rebuilt_.find(t);
    if (b != rebuilt_.end()) return ir::access(b->second, m->operands);
    return m;
  }

 private:
  const std::map<const TensorNode*, Replacement>& repl_;
  const std::unordered_map<const TensorNode*, Tensor>& rebuilt_;
};

// The state with every scope but the keys of `repl` rebuilt from `rewrite(scope, body)`, where
// the body's reads already go to the replacements and to rebuilt producers (scopes are visited
// producers first, so a consumer sees its producers' rebuilt versions). Outputs that are keys
// of `repl` become their replacements (which must keep the output's shape and indexing).
State rebuild(const State& s, const std::map<const TensorNode*, Replacement>& repl,
              const std::function<Expr(const Tensor&, const Expr&)>& rewrite,
              const std::string& rule) {
  std::unordered_map<const TensorNode*, Tensor> rebuilt;
  for (const Tensor& t : scopes(s)) {
    if (repl.count(t.get())) continue;
    RetargetAccesses retarget(repl, rebuilt);
    Expr body = rewrite(t, retarget.mutate(t->op->body));
    if (!body.same_as(t->op->body)) {
      rebuilt[t.get()] = ir::with_definition(t, t->op->axes, t->op->reduce_axes, body);
    }
  }
  State out;
  out.trace = s.trace;
  out.trace.push_back(rule);
  for (const Tensor& o : s.outputs) {
    auto r = repl.find(o.get());
    if (r != repl.end()) {
      TESSERA_CHECK(!r->second.reindex) << "derive: output " << o->name << " cannot be reindexed";
      TESSERA_CHECK(const_shape(r->second.tensor) == const_shape(o))
          << "derive: replacement of output " << o->name << " changes its shape";
      out.outputs.push_back(r->second.tensor);
      continue;
    }
    auto b = rebuilt.find(o.get());
    out.outputs.push_back(b != rebuilt.end() ? b->second : o);
  }
  return out;
}

}  // namespace

State replace_scopes(const State& s, const std::map<const TensorNode*, Replacement>& repl,
                     const std::string& rule) {
  return rebuild(
      s, repl, [](const Tensor&, const Expr& body) { return body; }, rule);
}

State map_bodies(const State& s, const std::function<Expr(const Tensor&, const Expr&)>& rewrite,
                 const std::string& rule) {
  return rebuild(s, {}, rewrite, rule);
}

State replace_scope(const State& s, const Tensor& old, Replacement repl, const std::string& rule) {
  return replace_scopes(s, {{old.get(), std::move(repl)}}, rule);
}

Tensor make_scope(const std::string& name, std::vector<ir::IterVar> axes,
                  std::vector<ir::IterVar> reduce_axes, ir::ReduceKind reduce, Expr body,
                  const std::string& tag, double pad_value) {
  auto op = std::make_shared<ir::ComputeOpNode>();
  op->name = name;
  op->axes = std::move(axes);
  op->reduce_axes = std::move(reduce_axes);
  op->reduce = reduce;
  op->body = std::move(body);
  op->tag = tag;
  const ir::DType dtype = op->body->dtype;
  Tensor t = ir::make_tensor(name, op, dtype);
  if (pad_value == 0.0) return t;
  auto n = std::make_shared<TensorNode>(*t);
  n->pad_value = pad_value;
  return n;
}

std::vector<ir::IterVar> fresh_copies(const std::vector<ir::IterVar>& ivs, ir::VarMap* vmap) {
  std::vector<ir::IterVar> out;
  for (const ir::IterVar& iv : ivs) {
    out.push_back(ir::make_iter_var(iv.var->name, iv.extent));
    (*vmap)[iv.var.get()] = out.back().var;
  }
  return out;
}

std::vector<Expr> iter_exprs(const std::vector<ir::IterVar>& ivs) {
  std::vector<Expr> out;
  for (const ir::IterVar& iv : ivs) out.push_back(iv.var);
  return out;
}

bool has_const_extents(const Tensor& scope) {
  for (const ir::IterVar& iv : scope->op->axes) {
    if (const_extent(iv) < 0) return false;
  }
  for (const ir::IterVar& iv : scope->op->reduce_axes) {
    if (const_extent(iv) < 0) return false;
  }
  return true;
}

Tensor shift_iterator(const Tensor& scope, bool reduce_axis, int axis, int64_t extent,
                      int64_t shift, const std::string& name) {
  const ir::ComputeOpNode& op = *scope->op;
  ir::VarMap vmap;
  std::vector<ir::IterVar> axes = fresh_copies(op.axes, &vmap);
  std::vector<ir::IterVar> red = fresh_copies(op.reduce_axes, &vmap);
  ir::IterVar& target = reduce_axis ? red[axis] : axes[axis];
  const ir::IterVar& old = reduce_axis ? op.reduce_axes[axis] : op.axes[axis];
  target = fresh_iter(old.var->name, extent);
  vmap[old.var.get()] = target.var - ir::int_imm(shift);
  return make_scope(name.empty() ? scope->name : name, axes, red, op.reduce,
                    substitute_body(op.body, vmap), rebuilt_tag(scope), scope->pad_value);
}

std::string rebuilt_tag(const Tensor& scope) {
  return scope->op->tag == "relayout" ? "relayout" : "derived";
}

ir::IterVar fresh_iter(const std::string& name, int64_t extent) {
  return ir::make_iter_var(name, ir::int_imm(extent));
}

int64_t const_extent(const ir::IterVar& iv) {
  return iv.extent->is_const_int() ? iv.extent->int_value : -1;
}

int64_t extent_product(const std::vector<ir::IterVar>& ivs) {
  int64_t p = 1;
  for (const ir::IterVar& iv : ivs) p *= const_extent(iv);
  return p;
}

std::vector<int64_t> const_shape(const Tensor& t) {
  std::vector<int64_t> out;
  for (const Expr& d : t->shape) {
    TESSERA_CHECK(d->is_const_int()) << "derive: tensor " << t->name << " has a symbolic shape";
    out.push_back(d->int_value);
  }
  return out;
}

namespace {

class SubstituteAndSimplify : public ir::ExprMutator {
 public:
  explicit SubstituteAndSimplify(const ir::VarMap& vmap) : vmap_(vmap) {}
  Expr mutate(const Expr& e) override {
    if (e->kind == ExprKind::kVar) {
      auto it = vmap_.find(e.get());
      return it == vmap_.end() ? e : it->second;
    }
    Expr m = mutate_children(e);
    if (m->kind != ExprKind::kAccess) return m;
    std::vector<Expr> idx;
    for (const Expr& i : m->operands) idx.push_back(ir::simplify(i));
    return ir::access(m->tensor, std::move(idx));
  }

 private:
  const ir::VarMap& vmap_;
};

}  // namespace

Expr substitute_body(const Expr& body, const ir::VarMap& vmap) {
  SubstituteAndSimplify sub(vmap);
  return sub.mutate(body);
}

std::vector<Expr> accesses(const Expr& e) {
  std::vector<Expr> out;
  ir::visit_expr(e, [&](const Expr& n) {
    if (n->kind == ExprKind::kAccess) out.push_back(n);
  });
  return out;
}

std::vector<Expr> accesses_of(const Expr& e, const Tensor& t) {
  std::vector<Expr> out;
  for (const Expr& a : accesses(e)) {
    if (a->tensor.get() == t.get()) out.push_back(a);
  }
  return out;
}

std::vector<runtime::NDArray> evaluate_state(
    const State& s, const std::map<const TensorNode*, runtime::NDArray>& inputs) {
  ops::ReferenceOptions opts;
  opts.out_of_bounds_reads_pad_value = true;
  return ops::run_reference(s.outputs, inputs, {}, opts);
}

std::string to_string(const State& s) {
  std::ostringstream os;
  // ir::to_string prints a tensor's whole DAG; each output's is printed once.
  for (const Tensor& o : s.outputs) os << ir::to_string(o) << "\n";
  return os.str();
}

}  // namespace tessera::derive
