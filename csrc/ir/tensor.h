#pragma once
// Tensors and compute definitions of the tensor-expression IR.
//
// A compute definition (EinNet's "scope", TVM's `compute`) has ordered traversal iterators
// (the output dimensions, in layout order), unordered summation iterators, a reducer and a body
// over tensor accesses. A tensor is either a placeholder (graph input) or the output of a compute
// definition; a body may read other computed tensors, which nests scopes into a DAG.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tessera::ir {

// An iterator over [0, extent). `var` carries constant bounds for the simplifier.
struct IterVar {
  Var var;
  Expr extent;
};

enum class ReduceKind : uint8_t { kNone, kSum, kMax, kMin };
const char* reduce_kind_name(ReduceKind k);
// The identity element of a reduction (0 for sum, -inf for max, +inf for min).
Expr reduce_identity(ReduceKind k, DType t);
// combine(acc, value) for a reduction.
Expr reduce_combine(ReduceKind k, Expr acc, Expr value);

struct ComputeOpNode {
  std::string name;
  std::vector<IterVar> axes;         // traversal iterators = output dims
  std::vector<IterVar> reduce_axes;  // summation iterators (empty when reduce == kNone)
  ReduceKind reduce = ReduceKind::kNone;
  Expr body;  // value per point (for reductions, the value combined over reduce_axes)
  // Pattern hint for sketch rules ("matmul", "conv2d", "pool", "elementwise", ...). Scheduling must
  // not depend on it for correctness; it only picks defaults.
  std::string tag;
  std::map<std::string, std::string> attrs;  // free-form metadata, e.g. the original op's params
};
using ComputeOp = std::shared_ptr<const ComputeOpNode>;

struct TensorNode {
  std::string name;
  std::vector<Expr> shape;
  DType dtype = DType::kFloat32;
  ComputeOp op;            // null for placeholders
  double pad_value = 0.0;  // value of reads outside the logical shape (layouts that pad)

  bool is_placeholder() const { return op == nullptr; }
  int ndim() const { return static_cast<int>(shape.size()); }
};

// A graph input.
Tensor placeholder(const std::string& name, std::vector<Expr> shape, DType dtype = DType::kFloat32);

// Elementwise/injective compute: out[axes] = f(axes).
Tensor compute(const std::string& name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Var>&)>& f, const std::string& tag = "");

// Reduction compute: out[axes] = reduce over raxes of f(axes, raxes).
Tensor reduce(const std::string& name, std::vector<Expr> shape, std::vector<Expr> reduce_extents,
              ReduceKind kind,
              const std::function<Expr(const std::vector<Var>&, const std::vector<Var>&)>& f,
              const std::string& tag = "");

// Builds a tensor from an explicit op (used by passes that rewrite definitions).
Tensor make_tensor(const std::string& name, ComputeOp op, DType dtype);

// A copy of compute tensor `t` whose op has these iterators and body instead (its shape follows
// the axes); name, dtype, tag, attrs and pad_value are kept. For passes that rewrite a definition.
Tensor with_definition(const Tensor& t, std::vector<IterVar> axes, std::vector<IterVar> reduce_axes,
                       Expr body);

// Attaches metadata to the op behind `t` (returns a new tensor node sharing everything else).
Tensor with_attrs(const Tensor& t, std::map<std::string, std::string> attrs);

// Iterator variable over [0, extent): bounds are [0, extent-1] when the extent is constant, or the
// extent's known envelope when it is a size variable.
IterVar make_iter_var(const std::string& name, Expr extent);

// The DAG below a set of outputs: compute tensors in topological order (producers first) and the
// placeholders it reads, in first-visit order.
struct TensorDAG {
  std::vector<Tensor> outputs;
  std::vector<Tensor> computes;      // topological order, outputs included
  std::vector<Tensor> placeholders;  // graph inputs
  std::vector<Var> size_vars;        // free symbolic sizes found in shapes and bodies
};
TensorDAG collect_dag(const std::vector<Tensor>& outputs);

// All tensors read directly by the body of `t`'s op (placeholders and computes), deduplicated.
std::vector<Tensor> direct_inputs(const Tensor& t);

}  // namespace tessera::ir
