#pragma once
// Compile-time folding of weight-only scopes (EinNet 6.3 "compile-time computable
// expressions"): a scope that reads only weights (e.g. the layout eOperator K'[c, (r, s, f)]
// of a derived matmul, or two weights concatenated by expression merging) is evaluated once
// and becomes a constant input of the program.
#include <map>

#include "derive/instantiate.h"
#include "derive/state.h"
#include "runtime/ndarray.h"

namespace tessera::derive {

struct FoldedProgram {
  State state;        // the program with every folded scope replaced by a placeholder
  DeriveContext ctx;  // the weights, the new placeholders included
  std::map<const ir::TensorNode*, runtime::NDArray> constants;  // values of the new placeholders
};

// Folds every maximal weight-only scope (one read by a scope that is not weight-only, or an
// output), evaluating it with the reference interpreter on `weights` (values of the weight
// placeholders it reads).
FoldedProgram fold_compile_time(const State& s, const DeriveContext& ctx,
                                const std::map<const ir::TensorNode*, runtime::NDArray>& weights);

}  // namespace tessera::derive
