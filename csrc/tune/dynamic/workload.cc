#include "tune/dynamic/workload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/simplify.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

using ir::Expr;
using ir::Tensor;

namespace {

// Rebuilds tensors bottom-up, each once: old node -> new tensor.
class DagRebuilder : public ir::ExprMutator {
 public:
  explicit DagRebuilder(const ir::VarMap& vmap) : vmap_(vmap) {}

  Tensor tensor(const Tensor& t) {
    auto it = done_.find(t.get());
    if (it != done_.end()) return it->second;
    Tensor copy = t->is_placeholder() ? placeholder_copy(t) : compute_copy(t);
    done_[t.get()] = copy;
    return copy;
  }

  Expr mutate(const Expr& e) override {
    if (e->kind == ir::ExprKind::kVar) {
      auto it = vmap_.find(e.get());
      return it != vmap_.end() ? it->second : e;
    }
    if (e->kind == ir::ExprKind::kAccess) {
      std::vector<Expr> idx;
      for (const Expr& i : e->operands) idx.push_back(folded(i));
      return ir::access(tensor(e->tensor), std::move(idx));
    }
    return mutate_children(e);
  }

 private:
  // Sizes and indices with the substitution folded: an instance's extents must be constants
  // (tuners read constant extents only), and simplified indices keep access analysis exact.
  Expr folded(const Expr& e) { return ir::simplify(mutate(e)); }

  std::vector<Expr> shape_of(const Tensor& t) {
    std::vector<Expr> s;
    for (const Expr& d : t->shape) s.push_back(folded(d));
    return s;
  }

  Tensor placeholder_copy(const Tensor& t) {
    Tensor p = ir::placeholder(t->name, shape_of(t), t->dtype);
    auto node = std::make_shared<ir::TensorNode>(*p);
    node->pad_value = t->pad_value;
    return node;
  }

  // New iterators over the new extents; the old iterators map to them while the body is copied
  // (the scope of this op's iterators is its own body).
  std::vector<ir::IterVar> fresh_iters(const std::vector<ir::IterVar>& old) {
    std::vector<ir::IterVar> out;
    for (const ir::IterVar& iv : old) {
      out.push_back(ir::make_iter_var(iv.var->name, folded(iv.extent)));
      vmap_[iv.var.get()] = out.back().var;
    }
    return out;
  }

  Tensor compute_copy(const Tensor& t) {
    auto op = std::make_shared<ir::ComputeOpNode>(*t->op);
    op->axes = fresh_iters(t->op->axes);
    op->reduce_axes = fresh_iters(t->op->reduce_axes);
    op->body = mutate(t->op->body);
    Tensor nt = ir::make_tensor(t->name, op, t->dtype);
    auto node = std::make_shared<ir::TensorNode>(*nt);
    node->pad_value = t->pad_value;
    return node;
  }

  ir::VarMap vmap_;  // grows with each op's iterators
  std::unordered_map<const ir::TensorNode*, Tensor> done_;
};

}  // namespace

DagCopy rebuild_dag(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                    const ir::VarMap& vmap) {
  DagRebuilder rb(vmap);
  DagCopy copy;
  for (const Tensor& o : outputs) copy.outputs.push_back(rb.tensor(o));
  for (const Tensor& i : inputs) copy.inputs.push_back(rb.tensor(i));
  return copy;
}

DynamicWorkload DynamicWorkload::create(std::vector<Tensor> outputs, std::vector<Tensor> inputs,
                                        std::string name, std::vector<int> constant_inputs) {
  DynamicWorkload w;
  w.name_ = std::move(name);
  std::sort(constant_inputs.begin(), constant_inputs.end());
  constant_inputs.erase(std::unique(constant_inputs.begin(), constant_inputs.end()),
                        constant_inputs.end());
  for (int i : constant_inputs) {
    TESSERA_CHECK(i >= 0 && static_cast<size_t>(i) < inputs.size())
        << "dynamic workload " << w.name_ << ": constant input " << i << " of " << inputs.size()
        << " inputs";
  }
  w.constant_inputs_ = std::move(constant_inputs);
  w.size_vars_ = ir::collect_dag(outputs).size_vars;
  for (const ir::Var& v : w.size_vars_) {
    TESSERA_CHECK(v->lo >= 0 && v->hi != ir::kNoUpperBound && v->lo <= v->hi)
        << "dynamic workload " << w.name_ << ": size variable " << v->name
        << " needs a finite range [lo, hi] with 0 <= lo <= hi";
    w.ranges_.push_back({v->lo, v->hi});
  }
  w.outputs_ = std::move(outputs);
  w.inputs_ = std::move(inputs);
  return w;
}

std::vector<std::string> DynamicWorkload::constant_input_names() const {
  std::vector<std::string> names;
  for (int i : constant_inputs_) names.push_back(inputs_[static_cast<size_t>(i)]->name);
  return names;
}

bool DynamicWorkload::in_range(const SizePoint& p) const {
  if (p.size() != ranges_.size()) return false;
  for (size_t a = 0; a < p.size(); ++a) {
    if (!ranges_[a].contains(p[a])) return false;
  }
  return true;
}

std::map<const ir::ExprNode*, int64_t> DynamicWorkload::size_map(const SizePoint& p) const {
  TESSERA_CHECK(p.size() == size_vars_.size())
      << name_ << ": " << p.size() << " sizes for " << size_vars_.size() << " size variables";
  std::map<const ir::ExprNode*, int64_t> m;
  for (size_t a = 0; a < p.size(); ++a) m[size_vars_[a].get()] = p[a];
  return m;
}

SizePoint DynamicWorkload::largest() const {
  SizePoint p;
  for (const SizeRange& r : ranges_) p.push_back(r.hi);
  return p;
}

DagCopy DynamicWorkload::instantiate(const SizePoint& p) const {
  TESSERA_CHECK(p.size() == size_vars_.size())
      << name_ << ": " << p.size() << " sizes for " << size_vars_.size() << " size variables";
  ir::VarMap vm;
  for (size_t a = 0; a < p.size(); ++a) vm[size_vars_[a].get()] = ir::int_imm(p[a]);
  return rebuild_dag(outputs_, inputs_, vm);
}

DagCopy DynamicWorkload::widened() const {
  ir::VarMap vm;
  for (const ir::Var& v : size_vars_) vm[v.get()] = ir::size_var(v->name, 0, ir::kNoUpperBound);
  return rebuild_dag(outputs_, inputs_, vm);
}

namespace {

// Up to `n` values of [lo, hi], evenly spread, both ends included.
std::vector<int64_t> spread(const SizeRange& r, int64_t n) {
  if (r.count() <= n) {
    std::vector<int64_t> all;
    for (int64_t v = r.lo; v <= r.hi; ++v) all.push_back(v);
    return all;
  }
  std::vector<int64_t> vals;
  for (int64_t i = 0; i < n; ++i) {
    const double t = n == 1 ? 1.0 : static_cast<double>(i) / static_cast<double>(n - 1);
    const int64_t v =
        r.lo + static_cast<int64_t>(std::llround(t * static_cast<double>(r.hi - r.lo)));
    if (vals.empty() || vals.back() != v) vals.push_back(v);
  }
  return vals;
}

}  // namespace

std::vector<SizePoint> sample_points(const DynamicWorkload& w, int64_t max_points) {
  TESSERA_CHECK(max_points >= 1) << "sample_points needs max_points >= 1";
  const size_t n = w.num_axes();
  double box = 1;
  for (const SizeRange& r : w.ranges()) box *= static_cast<double>(r.count());
  const int64_t per_axis =
      box <= static_cast<double>(max_points)
          ? std::numeric_limits<int64_t>::max()
          : std::max<int64_t>(2, static_cast<int64_t>(std::floor(
                                     std::pow(static_cast<double>(max_points), 1.0 / n))));
  std::vector<std::vector<int64_t>> axis_values;
  for (const SizeRange& r : w.ranges()) axis_values.push_back(spread(r, per_axis));
  std::vector<SizePoint> points{SizePoint{}};
  for (const std::vector<int64_t>& vals : axis_values) {
    std::vector<SizePoint> next;
    for (const SizePoint& p : points) {
      for (int64_t v : vals) {
        next.push_back(p);
        next.back().push_back(v);
      }
    }
    points = std::move(next);
  }
  return points;
}

}  // namespace tessera::tune::dynamic
