#include "tune/reuse/operator_type.h"

#include <unordered_map>

#include "ir/functor.h"
#include "ir/structural_hash.h"

namespace tessera::tune::reuse {

namespace {

// Range of the fresh sizes: every one alike, so that the hash and the equality check (which
// compare free variables' bounds) see no trace of the original extents.
constexpr int64_t kAbstractSizeLo = 1;

ir::Expr fresh_size() { return ir::size_var("n", kAbstractSizeLo); }

std::vector<ir::Expr> fresh_shape(size_t ndim) {
  std::vector<ir::Expr> shape;
  for (size_t i = 0; i < ndim; ++i) shape.push_back(fresh_size());
  return shape;
}

// Rewrites a body of the original DAG into the abstract one: iterators become the new iterators
// (whose bounds follow the new extents), accesses read the rebuilt tensors, and integer constants
// compared directly with an index (bounds checks) become fresh sizes.
class BodyRewriter : public ir::ExprMutator {
 public:
  BodyRewriter(const ir::VarMap& iters,
               const std::unordered_map<const ir::TensorNode*, ir::Tensor>& tensors)
      : iters_(iters), tensors_(tensors) {}

  ir::Expr mutate(const ir::Expr& e) override {
    if (e->kind == ir::ExprKind::kVar) {
      auto it = iters_.find(e.get());
      return it == iters_.end() ? e : it->second;
    }
    if (is_integer_comparison(*e)) {
      std::vector<ir::Expr> operands;
      for (const ir::Expr& o : e->operands)
        operands.push_back(o->kind == ir::ExprKind::kIntImm ? fresh_size() : mutate(o));
      return ir::with_operands(e, std::move(operands));
    }
    if (e->kind == ir::ExprKind::kAccess) {
      std::vector<ir::Expr> indices;
      for (const ir::Expr& i : e->operands) indices.push_back(mutate(i));
      return ir::access(tensors_.at(e->tensor.get()), std::move(indices));
    }
    return mutate_children(e);
  }

 private:
  const ir::VarMap& iters_;
  const std::unordered_map<const ir::TensorNode*, ir::Tensor>& tensors_;
};

std::vector<ir::IterVar> fresh_iters(const std::vector<ir::IterVar>& old, ir::VarMap* map) {
  std::vector<ir::IterVar> out;
  for (const ir::IterVar& iv : old) {
    ir::IterVar nv = ir::make_iter_var(iv.var->name, fresh_size());
    (*map)[iv.var.get()] = nv.var;
    out.push_back(nv);
  }
  return out;
}

ir::Tensor abstract_compute(const ir::Tensor& t,
                            const std::unordered_map<const ir::TensorNode*, ir::Tensor>& done) {
  const ir::ComputeOpNode& old = *t->op;
  auto op = std::make_shared<ir::ComputeOpNode>(old);
  ir::VarMap iters;
  op->axes = fresh_iters(old.axes, &iters);
  op->reduce_axes = fresh_iters(old.reduce_axes, &iters);
  op->body = BodyRewriter(iters, done).mutate(old.body);
  auto node = std::make_shared<ir::TensorNode>(*t);
  node->op = op;
  // A computed tensor's shape is its traversal extents.
  node->shape.clear();
  for (const ir::IterVar& iv : op->axes) node->shape.push_back(iv.extent);
  return node;
}

}  // namespace

bool is_integer_comparison(const ir::ExprNode& e) {
  switch (e.kind) {
    case ir::ExprKind::kEQ:
    case ir::ExprKind::kNE:
    case ir::ExprKind::kLT:
    case ir::ExprKind::kLE:
    case ir::ExprKind::kGT:
    case ir::ExprKind::kGE:
      return ir::is_int(e.operands[0]->dtype);
    default:
      return false;
  }
}

std::vector<ir::Tensor> abstract_extents(const std::vector<ir::Tensor>& outputs) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  std::unordered_map<const ir::TensorNode*, ir::Tensor> done;
  for (const ir::Tensor& p : dag.placeholders) {
    auto node = std::make_shared<ir::TensorNode>(*p);
    node->shape = fresh_shape(p->shape.size());
    done[p.get()] = node;
  }
  // Producers first: every access of a body finds its tensor rebuilt already.
  for (const ir::Tensor& c : dag.computes) done[c.get()] = abstract_compute(c, done);
  std::vector<ir::Tensor> out;
  for (const ir::Tensor& o : outputs) out.push_back(done.at(o.get()));
  return out;
}

bool OperatorType::operator==(const OperatorType& other) const {
  if (hash != other.hash) return false;
  if (dag == other.dag) return true;
  return dag && other.dag && ir::structural_equal(*dag, *other.dag);
}

OperatorType operator_type(const std::vector<ir::Tensor>& outputs) {
  OperatorType t;
  t.dag = std::make_shared<const std::vector<ir::Tensor>>(abstract_extents(outputs));
  t.hash = ir::structural_hash(*t.dag);
  return t;
}

}  // namespace tessera::tune::reuse
