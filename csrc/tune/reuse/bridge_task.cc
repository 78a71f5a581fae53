#include "tune/reuse/bridge_task.h"

#include <algorithm>
#include <unordered_map>

#include "ir/functor.h"
#include "tune/reuse/operator_type.h"

namespace tessera::tune::reuse {

namespace {

// Walks the DAGs of a and b in lockstep and builds the bridge. Any mismatch sets `failed`;
// the partial result is then discarded.
class Zipper {
 public:
  bool failed = false;

  // The smaller of two constant extents (a mismatch if either is not constant).
  ir::Expr min_extent(const ir::Expr& x, const ir::Expr& y) {
    if (!x->is_const_int() || !y->is_const_int()) {
      failed = true;
      return x;
    }
    return x->int_value <= y->int_value ? x : y;
  }

  ir::Tensor placeholder(const ir::Tensor& a, const ir::Tensor& b) {
    if (a->ndim() != b->ndim() || a->dtype != b->dtype) failed = true;
    std::vector<ir::Expr> shape;
    for (int d = 0; d < a->ndim() && !failed; ++d) {
      shape.push_back(min_extent(a->shape[d], b->shape[d]));
    }
    auto node = std::make_shared<ir::TensorNode>(*a);
    node->shape = shape;
    return remember(a, b, node);
  }

  ir::Tensor compute(const ir::Tensor& a, const ir::Tensor& b) {
    const ir::ComputeOpNode& oa = *a->op;
    const ir::ComputeOpNode& ob = *b->op;
    if (oa.axes.size() != ob.axes.size() || oa.reduce_axes.size() != ob.reduce_axes.size() ||
        oa.reduce != ob.reduce || a->dtype != b->dtype) {
      failed = true;
      return a;
    }
    auto op = std::make_shared<ir::ComputeOpNode>(oa);
    op->axes = iters(oa.axes, ob.axes);
    op->reduce_axes = iters(oa.reduce_axes, ob.reduce_axes);
    op->body = zip(oa.body, ob.body, false);
    auto node = std::make_shared<ir::TensorNode>(*a);
    node->op = op;
    node->shape.clear();
    for (const ir::IterVar& iv : op->axes) node->shape.push_back(iv.extent);
    return remember(a, b, node);
  }

  const ir::Tensor& rebuilt(const ir::Tensor& a) const { return tensors_.at(a.get()); }
  bool has(const ir::Tensor& a) const { return tensors_.count(a.get()) > 0; }

 private:
  ir::Tensor remember(const ir::Tensor& a, const ir::Tensor& b, ir::Tensor rebuilt) {
    tensors_[a.get()] = rebuilt;
    partner_[a.get()] = b.get();
    return rebuilt;
  }

  std::vector<ir::IterVar> iters(const std::vector<ir::IterVar>& a,
                                 const std::vector<ir::IterVar>& b) {
    std::vector<ir::IterVar> out;
    for (size_t i = 0; i < a.size() && !failed; ++i) {
      ir::IterVar nv = ir::make_iter_var(a[i].var->name, min_extent(a[i].extent, b[i].extent));
      vars_[a[i].var.get()] = nv.var;
      var_partner_[a[i].var.get()] = b[i].var.get();
      out.push_back(nv);
    }
    return out;
  }

  // `in_comparison`: x and y are direct operands of an integer comparison, where differing
  // constants are bounds checks (extents in disguise) and take the smaller one.
  ir::Expr zip(const ir::Expr& x, const ir::Expr& y, bool in_comparison) {
    if (failed) return x;
    if (x->kind != y->kind || x->dtype != y->dtype || x->operands.size() != y->operands.size() ||
        (x->kind == ir::ExprKind::kCall && x->call_op != y->call_op)) {
      failed = true;
      return x;
    }
    switch (x->kind) {
      case ir::ExprKind::kIntImm:
        if (x->int_value == y->int_value) return x;
        if (!in_comparison) failed = true;
        return x->int_value < y->int_value ? x : y;
      case ir::ExprKind::kFloatImm:
        if (x->float_value != y->float_value) failed = true;
        return x;
      case ir::ExprKind::kVar: {
        auto it = vars_.find(x.get());
        if (it == vars_.end()) {  // a free variable: the same one on both sides
          if (!x.same_as(y)) failed = true;
          return x;
        }
        if (var_partner_.at(x.get()) != y.get()) failed = true;
        return it->second;
      }
      case ir::ExprKind::kAccess: {
        auto it = partner_.find(x->tensor.get());
        if (it == partner_.end() || it->second != y->tensor.get()) {
          failed = true;
          return x;
        }
        return ir::access(tensors_.at(x->tensor.get()), zip_operands(x, y, false));
      }
      case ir::ExprKind::kLoad:
        failed = true;  // loop-IR reads never occur in compute bodies
        return x;
      default:
        return ir::with_operands(x, zip_operands(x, y, is_integer_comparison(*x)));
    }
  }

  std::vector<ir::Expr> zip_operands(const ir::Expr& x, const ir::Expr& y, bool in_comparison) {
    std::vector<ir::Expr> out;
    for (size_t i = 0; i < x->operands.size(); ++i) {
      out.push_back(zip(x->operands[i], y->operands[i], in_comparison));
    }
    return out;
  }

  std::unordered_map<const ir::TensorNode*, ir::Tensor> tensors_;
  std::unordered_map<const ir::TensorNode*, const ir::TensorNode*> partner_;
  ir::VarMap vars_;
  std::unordered_map<const ir::ExprNode*, const ir::ExprNode*> var_partner_;
};

}  // namespace

std::optional<Task> bridge_task(const Task& a, const Task& b, const std::string& name) {
  const ir::TensorDAG da = ir::collect_dag(a.outputs), db = ir::collect_dag(b.outputs);
  if (da.placeholders.size() != db.placeholders.size() ||
      da.computes.size() != db.computes.size() || a.outputs.size() != b.outputs.size() ||
      a.inputs.size() != b.inputs.size()) {
    return std::nullopt;
  }
  // collect_dag visits equal structures in the same order, so nodes pair up by position.
  Zipper z;
  for (size_t i = 0; i < da.placeholders.size() && !z.failed; ++i) {
    z.placeholder(da.placeholders[i], db.placeholders[i]);
  }
  for (size_t i = 0; i < da.computes.size() && !z.failed; ++i) {
    z.compute(da.computes[i], db.computes[i]);
  }
  if (z.failed) return std::nullopt;
  std::vector<ir::Tensor> outputs, inputs;
  for (const ir::Tensor& o : a.outputs) outputs.push_back(z.rebuilt(o));
  for (const ir::Tensor& in : a.inputs) {
    if (!z.has(in)) return std::nullopt;  // an input the DAG does not read
    inputs.push_back(z.rebuilt(in));
  }
  Task t = Task::create(outputs, inputs, name);
  t.parallel = a.parallel;
  t.constant_inputs = a.constant_inputs;
  return t;
}

}  // namespace tessera::tune::reuse
