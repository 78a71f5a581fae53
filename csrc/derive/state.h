#pragma once
// A derivation state of the EinNet optimizer: a tensor program as a DAG of scopes.
//
// A scope is an ir compute definition (traversal iterators = `axes`, summation iterators =
// `reduce_axes`, a body over tensor accesses). The state keeps the program's outputs; the scopes
// are the compute tensors below them. Derivation rules never change the outputs' shapes, so
// every state derived from one program computes the same values at the same output positions.
//
// Semantics of reads (EinNet's padding): a read outside a tensor's shape yields the tensor's
// pad_value (0 unless set). Rules rely on it: a tightened scope is read outside its new bounds
// where its values were proven to be 0. Evaluation of states therefore uses the reference
// interpreter with out-of-bounds reads allowed.
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/functor.h"
#include "ir/tensor.h"
#include "runtime/ndarray.h"

namespace tessera::derive {

struct State {
  std::vector<ir::Tensor> outputs;
  std::vector<std::string> trace;  // rules applied since the initial program, in order
};

// Compute tensors of the state in topological order (producers first), outputs included.
std::vector<ir::Tensor> scopes(const State& s);
// Scopes whose bodies read `t` directly.
std::vector<ir::Tensor> consumers(const State& s, const ir::Tensor& t);
bool is_output(const State& s, const ir::Tensor& t);

// How reads of a replaced scope are rewritten: old index list -> new index list. Empty means
// the replacement has the same shape and is read at the same indices.
using Reindex = std::function<std::vector<ir::Expr>(const std::vector<ir::Expr>&)>;

struct Replacement {
  ir::Tensor tensor;
  Reindex reindex;
};

// A new state in which every read of a key scope reads its replacement instead (through
// `reindex`), consumers rebuilt transitively. A replaced output must keep its shape and must
// not be reindexed (callers check; this throws). `rule` is appended to the trace.
State replace_scopes(const State& s, const std::map<const ir::TensorNode*, Replacement>& repl,
                     const std::string& rule);
State replace_scope(const State& s, const ir::Tensor& old, Replacement repl,
                    const std::string& rule);

// A new state in which every scope's body is `rewrite(scope, body)` (reads retargeted to the
// rewritten producers first). Shapes must not change.
State map_bodies(const State& s,
                 const std::function<ir::Expr(const ir::Tensor&, const ir::Expr&)>& rewrite,
                 const std::string& rule);

// A new scope. Its pad_value is `pad_value` (a scope that replaces another keeps the replaced
// one's, so consumers reading outside its shape see the same value).
ir::Tensor make_scope(const std::string& name, std::vector<ir::IterVar> axes,
                      std::vector<ir::IterVar> reduce_axes, ir::ReduceKind reduce, ir::Expr body,
                      const std::string& tag, double pad_value = 0.0);

// Fresh copies of iterators (same names and extents, new variables), added to `vmap` as
// old -> new.
std::vector<ir::IterVar> fresh_copies(const std::vector<ir::IterVar>& ivs,
                                      std::unordered_map<const ir::ExprNode*, ir::Expr>* vmap);
// The variables of iterators, as expressions.
std::vector<ir::Expr> iter_exprs(const std::vector<ir::IterVar>& ivs);
// True when every traversal and summation extent of the scope is a constant.
bool has_const_extents(const ir::Tensor& scope);

// A copy of `scope` (fresh iterators, same name unless `name` is given) whose traversal (or,
// with `reduce_axis`, summation) iterator `axis` runs over [0, extent) and stands for
// old = new - shift in the body.
ir::Tensor shift_iterator(const ir::Tensor& scope, bool reduce_axis, int axis, int64_t extent,
                          int64_t shift, const std::string& name = "");

// The tag of a rebuilt copy of `scope` ("derived"): a regrouping copy stays "relayout", which
// the scheduler materialises for the reduction reading it (rules_intra.h).
std::string rebuilt_tag(const ir::Tensor& scope);

// Fresh iterator with the given constant extent (bounds [0, extent-1] for the simplifier).
ir::IterVar fresh_iter(const std::string& name, int64_t extent);
// Constant extent of an iterator; -1 when symbolic.
int64_t const_extent(const ir::IterVar& iv);
// Product of the constant extents of iterators (1 for none).
int64_t extent_product(const std::vector<ir::IterVar>& ivs);
// Constant shape of a tensor (throws for symbolic dims: derivation works on concrete shapes).
std::vector<int64_t> const_shape(const ir::Tensor& t);

// Substitutes variables in a body and simplifies the index expressions of its accesses (the
// float arithmetic around them is left as is).
ir::Expr substitute_body(const ir::Expr& body,
                         const std::unordered_map<const ir::ExprNode*, ir::Expr>& vmap);

// Access nodes in `e` (every occurrence, parents first).
std::vector<ir::Expr> accesses(const ir::Expr& e);
// Access nodes in `e` that read `t`.
std::vector<ir::Expr> accesses_of(const ir::Expr& e, const ir::Tensor& t);

// Evaluates the state's outputs on the given inputs with the reference interpreter (reads
// outside a shape give pad_value).
std::vector<runtime::NDArray> evaluate_state(
    const State& s, const std::map<const ir::TensorNode*, runtime::NDArray>& inputs);

// Multi-line text: every scope's definition, producers first.
std::string to_string(const State& s);

}  // namespace tessera::derive
