#include "ir/tensor.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_set>

#include "ir/functor.h"
#include "util/check.h"

namespace tessera::ir {

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::kNone:
      return "none";
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
  }
  return "?";
}

namespace {

// The lowest and highest values of an integer (or bool) dtype: the identities of max and min.
// Not int64's for narrower types: an int32 accumulator starting at INT64_MIN truncates to 0.
int64_t lowest_int(DType t) {
  if (t == DType::kBool) return 0;
  if (t == DType::kInt32) return std::numeric_limits<int32_t>::min();
  return std::numeric_limits<int64_t>::min();
}

int64_t highest_int(DType t) {
  if (t == DType::kBool) return 1;
  if (t == DType::kInt32) return std::numeric_limits<int32_t>::max();
  return std::numeric_limits<int64_t>::max();
}

}  // namespace

Expr reduce_identity(ReduceKind k, DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (k) {
    case ReduceKind::kSum:
      return make_const(t, 0.0);
    case ReduceKind::kMax:
      return is_float(t) ? float_imm(-inf, t) : int_imm(lowest_int(t), t);
    case ReduceKind::kMin:
      return is_float(t) ? float_imm(inf, t) : int_imm(highest_int(t), t);
    case ReduceKind::kNone:
      break;
  }
  TESSERA_FAIL() << "no identity for reduction kind none";
}

Expr reduce_combine(ReduceKind k, Expr acc, Expr value) {
  switch (k) {
    case ReduceKind::kSum:
      return add(std::move(acc), std::move(value));
    case ReduceKind::kMax:
      return max(std::move(acc), std::move(value));
    case ReduceKind::kMin:
      return min(std::move(acc), std::move(value));
    case ReduceKind::kNone:
      break;
  }
  TESSERA_FAIL() << "no combiner for reduction kind none";
}

IterVar make_iter_var(const std::string& name, Expr extent) {
  int64_t hi = kNoUpperBound;
  if (extent->kind == ExprKind::kIntImm) {
    hi = extent->int_value - 1;
  } else if (extent->kind == ExprKind::kVar && extent->hi != kNoUpperBound) {
    hi = extent->hi - 1;
  }
  return IterVar{var(name, 0, hi), std::move(extent)};
}

namespace {

// Every size a user gives enters here: dimensions are non-negative, and the tensor's bytes (at
// the largest values its symbolic dimensions may take) are countable in int64, so no later size
// arithmetic overflows.
void check_shape(const std::string& name, const std::vector<Expr>& shape, DType dtype) {
  int64_t bytes = dtype_bytes(dtype);
  for (size_t d = 0; d < shape.size(); ++d) {
    const Expr& e = shape[d];
    TESSERA_CHECK(e.defined()) << "tensor " << name << ": dimension " << d << " is undefined";
    if (e->is_const_int()) {
      TESSERA_CHECK(e->int_value >= 0) << "tensor " << name << ": dimension " << d << " is "
                                       << e->int_value << "; dimensions must be >= 0";
    }
    const int64_t hi = e->is_const_int() ? e->int_value : e->is_var() ? e->hi : kNoUpperBound;
    if (hi == kNoUpperBound || hi <= 0 || bytes == 0) {
      bytes = hi == 0 ? 0 : bytes;
      continue;
    }
    TESSERA_CHECK(bytes <= std::numeric_limits<int64_t>::max() / hi)
        << "tensor " << name << " is too large: its size in bytes overflows int64 (dimension " << d
        << " is " << hi << ")";
    bytes *= hi;
  }
}

}  // namespace

Tensor placeholder(const std::string& name, std::vector<Expr> shape, DType dtype) {
  check_shape(name, shape, dtype);
  auto t = std::make_shared<TensorNode>();
  t->name = name;
  t->shape = std::move(shape);
  t->dtype = dtype;
  return t;
}

namespace {
const char* kAxisNames = "ijlmnopqrstuvw";
const char* kReduceAxisNames = "kabcdefgh";

std::string axis_name(const char* names, size_t i) {
  size_t n = std::char_traits<char>::length(names);
  std::string s(1, names[i % n]);
  if (i >= n) s += std::to_string(i / n);
  return s;
}
}  // namespace

Tensor make_tensor(const std::string& name, ComputeOp op, DType dtype) {
  auto t = std::make_shared<TensorNode>();
  t->name = name;
  for (const IterVar& iv : op->axes) t->shape.push_back(iv.extent);
  check_shape(name, t->shape, dtype);
  t->dtype = dtype;
  t->op = std::move(op);
  return t;
}

Tensor compute(const std::string& name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Var>&)>& f, const std::string& tag) {
  auto op = std::make_shared<ComputeOpNode>();
  op->name = name;
  op->tag = tag.empty() ? "elementwise" : tag;
  std::vector<Var> vars;
  for (size_t i = 0; i < shape.size(); ++i) {
    op->axes.push_back(make_iter_var(axis_name(kAxisNames, i), shape[i]));
    vars.push_back(op->axes.back().var);
  }
  op->body = f(vars);
  TESSERA_CHECK(op->body.defined()) << "compute " << name << " returned no body";
  DType dt = op->body->dtype;
  return make_tensor(name, op, dt);
}

Tensor reduce(const std::string& name, std::vector<Expr> shape, std::vector<Expr> reduce_extents,
              ReduceKind kind,
              const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f,
              const std::string& tag) {
  TESSERA_CHECK(kind != ReduceKind::kNone) << "reduce() needs a reduction kind";
  auto op = std::make_shared<ComputeOpNode>();
  op->name = name;
  op->tag = tag.empty() ? "reduce" : tag;
  op->reduce = kind;
  std::vector<Var> vars, rvars;
  for (size_t i = 0; i < shape.size(); ++i) {
    op->axes.push_back(make_iter_var(axis_name(kAxisNames, i), shape[i]));
    vars.push_back(op->axes.back().var);
  }
  for (size_t i = 0; i < reduce_extents.size(); ++i) {
    op->reduce_axes.push_back(make_iter_var(axis_name(kReduceAxisNames, i), reduce_extents[i]));
    rvars.push_back(op->reduce_axes.back().var);
  }
  op->body = f(vars, rvars);
  TESSERA_CHECK(op->body.defined()) << "reduce " << name << " returned no body";
  DType dt = op->body->dtype;
  return make_tensor(name, op, dt);
}

Tensor with_definition(const Tensor& t, std::vector<IterVar> axes, std::vector<IterVar> reduce_axes,
                       Expr body) {
  TESSERA_CHECK(!t->is_placeholder()) << "placeholders have no definition to rewrite";
  auto op = std::make_shared<ComputeOpNode>(*t->op);
  op->axes = std::move(axes);
  op->reduce_axes = std::move(reduce_axes);
  op->body = std::move(body);
  auto n = std::make_shared<TensorNode>(*t);
  n->shape.clear();
  for (const IterVar& iv : op->axes) n->shape.push_back(iv.extent);
  n->op = op;
  return n;
}

Tensor with_attrs(const Tensor& t, std::map<std::string, std::string> attrs) {
  TESSERA_CHECK(!t->is_placeholder()) << "placeholders have no op to annotate";
  auto op = std::make_shared<ComputeOpNode>(*t->op);
  for (auto& [k, v] : attrs) op->attrs[k] = v;
  auto nt = std::make_shared<TensorNode>(*t);
  nt->op = op;
  return nt;
}

std::vector<Tensor> direct_inputs(const Tensor& t) {
  std::vector<Tensor> out;
  if (t->is_placeholder()) return out;
  std::unordered_set<const TensorNode*> seen;
  visit_expr(t->op->body, [&](const Expr& e) {
    if (e->kind == ExprKind::kAccess && seen.insert(e->tensor.get()).second) {
      out.push_back(e->tensor);
    }
  });
  return out;
}

TensorDAG collect_dag(const std::vector<Tensor>& outputs) {
  TensorDAG dag;
  dag.outputs = outputs;
  std::unordered_set<const TensorNode*> visited;
  std::unordered_set<const ExprNode*> seen_vars;
  auto note_vars = [&](const Expr& e) {
    for (const Var& v : free_vars(e)) {
      if (seen_vars.insert(v.get()).second) dag.size_vars.push_back(v);
    }
  };
  // Iterative post-order DFS so deep elementwise chains do not overflow the stack.
  std::vector<std::pair<Tensor, bool>> stack;
  for (auto it = outputs.rbegin(); it != outputs.rend(); ++it) stack.push_back({*it, false});
  while (!stack.empty()) {
    auto [t, expanded] = stack.back();
    stack.pop_back();
    if (expanded) {
      dag.computes.push_back(t);
      continue;
    }
    if (!visited.insert(t.get()).second) continue;
    for (const Expr& s : t->shape) note_vars(s);
    if (t->is_placeholder()) {
      dag.placeholders.push_back(t);
      continue;
    }
    stack.push_back({t, true});
    auto inputs = direct_inputs(t);
    for (auto it = inputs.rbegin(); it != inputs.rend(); ++it) {
      if (!visited.count(it->get())) stack.push_back({*it, false});
    }
  }
  // Size variables: free variables of shapes and reduce extents that are not iterators.
  for (const Tensor& t : dag.computes) {
    for (const IterVar& iv : t->op->reduce_axes) note_vars(iv.extent);
  }
  return dag;
}

}  // namespace tessera::ir
