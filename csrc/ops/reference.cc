#include "ops/reference.h"

#include <cmath>
#include <sstream>
#include <unordered_map>

#include "ir/eval.h"
#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Scalar;
using ir::Tensor;
using ir::TensorNode;
using runtime::NDArray;

namespace {

std::string index_str(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

// The elements of one tensor during interpretation: doubles for float tensors, int64 for
// integer and bool tensors (so integer index data stays exact).
struct Values {
  ir::DType dtype = ir::DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> f;
  std::vector<int64_t> i;

  bool is_int() const { return !ir::is_float(dtype); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  // Row-major offset, or -1 when out of bounds.
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (idx[d] < 0 || idx[d] >= shape[d]) return -1;
      off = off * shape[d] + idx[d];
    }
    return off;
  }
  void allocate() {
    if (is_int()) {
      i.assign(numel(), 0);
    } else {
      f.assign(numel(), 0.0);
    }
  }
  Scalar get(int64_t off) const {
    return is_int() ? Scalar::of_int(i[off]) : Scalar::of_float(f[off]);
  }
  void set(int64_t off, const Scalar& s) {
    if (is_int()) {
      i[off] = s.is_int ? s.i : static_cast<int64_t>(std::trunc(s.f));
    } else {
      f[off] = s.as_double();
    }
  }
};

// Advances a row-major multi-index over `extents`; returns false after the last point.
bool next_index(std::vector<int64_t>& idx, const std::vector<int64_t>& extents) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < extents[d]) return true;
    idx[d] = 0;
  }
  return false;
}

bool any_zero(const std::vector<int64_t>& extents) {
  for (int64_t e : extents) {
    if (e == 0) return true;
  }
  return false;
}

// acc = combine(acc, v) with the IR's semantics: max/min propagate NaN (like torch).
Scalar combine(ir::ReduceKind kind, const Scalar& acc, const Scalar& v) {
  if (acc.is_int && v.is_int) {
    switch (kind) {
      case ir::ReduceKind::kSum:
        return Scalar::of_int(ir::wrapping_add(acc.i, v.i));
      case ir::ReduceKind::kMax:
        return Scalar::of_int(v.i > acc.i ? v.i : acc.i);
      case ir::ReduceKind::kMin:
        return Scalar::of_int(v.i < acc.i ? v.i : acc.i);
      case ir::ReduceKind::kNone:
        break;
    }
  } else {
    const double a = acc.as_double(), b = v.as_double();
    switch (kind) {
      case ir::ReduceKind::kSum:
        return Scalar::of_float(a + b);
      case ir::ReduceKind::kMax:
        return Scalar::of_float(std::isnan(a) || std::isnan(b) ? NAN : (b > a ? b : a));
      case ir::ReduceKind::kMin:
        return Scalar::of_float(std::isnan(a) || std::isnan(b) ? NAN : (b < a ? b : a));
      case ir::ReduceKind::kNone:
        break;
    }
  }
  TESSERA_FAIL() << "reference: no combiner for reduction kind none";
}

class Interpreter {
 public:
  explicit Interpreter(const ReferenceOptions& options) : options_(options) {
    env_.read_tensor = [this](const TensorNode& t, const std::vector<int64_t>& idx) {
      return read(t, idx);
    };
  }

  void bind_size(const ir::ExprNode* var, int64_t value) { env_.vars[var] = Scalar::of_int(value); }
  bool is_bound(const ir::ExprNode* var) const { return env_.vars.count(var) != 0; }

  std::vector<int64_t> eval_shape(const TensorNode& t) {
    std::vector<int64_t> out;
    for (const Expr& d : t.shape) {
      int64_t v = eval_int(d, "shape of " + t.name);
      TESSERA_CHECK(v >= 0) << "reference: tensor " << t.name << " has negative extent " << v;
      out.push_back(v);
    }
    return out;
  }

  void set_input(const TensorNode& t, const NDArray& a) {
    TESSERA_CHECK(a.dtype == t.dtype) << "reference: input for " << t.name << " is " << a.describe()
                                      << ", the placeholder is " << ir::dtype_name(t.dtype);
    const std::vector<int64_t> shape = eval_shape(t);
    TESSERA_CHECK(shape == a.shape) << "reference: input for " << t.name << " has shape "
                                    << index_str(a.shape) << ", expected " << index_str(shape);
    Values v;
    v.dtype = t.dtype;
    v.shape = shape;
    v.allocate();
    for (int64_t k = 0; k < v.numel(); ++k) {
      if (v.is_int()) {
        v.i[k] = a.get_int(k);
      } else {
        v.f[k] = a.get(k);
      }
    }
    values_[&t] = std::move(v);
  }

  // Evaluates every point of a compute tensor whose inputs are all available.
  void run(const TensorNode& t) {
    const ir::ComputeOpNode& op = *t.op;
    Values out;
    out.dtype = t.dtype;
    out.shape = eval_shape(t);
    out.allocate();
    // Slots for the iterators, updated in place for every point.
    std::vector<Scalar*> axis_slots, reduce_slots;
    for (const ir::IterVar& iv : op.axes) axis_slots.push_back(&env_.vars[iv.var.get()]);
    for (const ir::IterVar& iv : op.reduce_axes) reduce_slots.push_back(&env_.vars[iv.var.get()]);

    std::vector<int64_t> idx(out.shape.size(), 0);
    if (!any_zero(out.shape)) {
      int64_t off = 0;
      do {
        for (size_t d = 0; d < idx.size(); ++d) *axis_slots[d] = Scalar::of_int(idx[d]);
        out.set(off++, op.reduce == ir::ReduceKind::kNone ? eval(op.body)
                                                          : reduce_point(op, reduce_slots));
      } while (next_index(idx, out.shape));
    }
    values_[&t] = std::move(out);
  }

  NDArray to_array(const TensorNode& t) const {
    const Values& v = values_.at(&t);
    NDArray a(t.dtype, v.shape);
    for (int64_t k = 0; k < v.numel(); ++k) {
      if (v.is_int()) {
        a.set_int(k, v.i[k]);
      } else {
        a.set(k, v.f[k]);
      }
    }
    return a;
  }

 private:
  Scalar eval(const Expr& e) { return ir::evaluate(e, env_); }

  int64_t eval_int(const Expr& e, const std::string& what) {
    Scalar s = eval(e);
    TESSERA_CHECK(s.is_int) << "reference: " << what << " is not an integer";
    return s.i;
  }

  Scalar reduce_point(const ir::ComputeOpNode& op, const std::vector<Scalar*>& slots) {
    // Extents are evaluated per point: they may depend on size variables (and, in principle, on
    // the output iterators).
    std::vector<int64_t> extents;
    for (const ir::IterVar& iv : op.reduce_axes) {
      extents.push_back(eval_int(iv.extent, "reduction extent of " + op.name));
    }
    Scalar acc = eval(ir::reduce_identity(op.reduce, op.body->dtype));
    if (any_zero(extents)) return acc;
    std::vector<int64_t> r(extents.size(), 0);
    do {
      for (size_t d = 0; d < r.size(); ++d) *slots[d] = Scalar::of_int(r[d]);
      acc = combine(op.reduce, acc, eval(op.body));
    } while (next_index(r, extents));
    return acc;
  }

  Scalar read(const TensorNode& t, const std::vector<int64_t>& idx) {
    auto it = values_.find(&t);
    TESSERA_CHECK(it != values_.end())
        << "reference: tensor " << t.name << " is read before it was computed";
    const Values& v = it->second;
    TESSERA_CHECK(idx.size() == v.shape.size())
        << "reference: " << t.name << " read with " << idx.size() << " indices";
    const int64_t off = v.offset(idx);
    if (off < 0) {
      TESSERA_CHECK(options_.out_of_bounds_reads_pad_value)
          << "reference: out-of-bounds read " << t.name << index_str(idx) << " of shape "
          << index_str(v.shape);
      return v.is_int() ? Scalar::of_int(static_cast<int64_t>(t.pad_value))
                        : Scalar::of_float(t.pad_value);
    }
    return v.get(off);
  }

  ReferenceOptions options_;
  ir::EvalEnv env_;
  std::unordered_map<const TensorNode*, Values> values_;
};

}  // namespace

std::vector<NDArray> run_reference(const std::vector<Tensor>& outputs,
                                   const std::map<const TensorNode*, NDArray>& inputs,
                                   const std::map<const ir::ExprNode*, int64_t>& size_values,
                                   const ReferenceOptions& options) {
  const ir::TensorDAG dag = ir::collect_dag(outputs);
  Interpreter interp(options);
  for (const auto& [var, value] : size_values) interp.bind_size(var, value);

  // Sizes not given explicitly but visible as a placeholder dim come from the input array.
  for (const Tensor& p : dag.placeholders) {
    auto it = inputs.find(p.get());
    TESSERA_CHECK(it != inputs.end()) << "reference: no input array for placeholder " << p->name;
    const NDArray& a = it->second;
    TESSERA_CHECK(a.ndim() == p->ndim()) << "reference: input for " << p->name << " is "
                                         << a.describe() << ", expected " << p->ndim() << " dims";
    for (int d = 0; d < p->ndim(); ++d) {
      const Expr& dim = p->shape[d];
      if (dim->kind == ir::ExprKind::kVar && !interp.is_bound(dim.get())) {
        interp.bind_size(dim.get(), a.shape[d]);
      }
    }
  }
  for (const ir::Var& v : dag.size_vars) {
    TESSERA_CHECK(interp.is_bound(v.get()))
        << "reference: no value for size variable " << v->name << " (pass it in size_values)";
  }
  for (const Tensor& p : dag.placeholders) interp.set_input(*p, inputs.at(p.get()));
  for (const Tensor& t : dag.computes) interp.run(*t);

  std::vector<NDArray> results;
  for (const Tensor& t : outputs) results.push_back(interp.to_array(*t));
  return results;
}

}  // namespace tessera::ops
