#pragma once
// Tensor-expression definitions of a tessera.op program.
//
// Each statement becomes one compute op named after its target: a statement whose right-hand
// side is a reduction becomes ir::reduce, anything else ir::compute. A reduction inside a larger
// expression (relu(sum(k) ...), X[i] - max(j) ...) is split off into its own reduce op named
// <target>_<kind> over the iterators it uses, read back by the enclosing expression; the stage
// planner then fuses a trailing elementwise consumer into the reduction as an epilogue.
//
// Types follow torch: the element type is that of the inputs; mixing float widths promotes to
// the wider one, integers (iterators, integer tensors, integer literals) meeting floats become
// floats, '/' of two integers is float32 division, '//' and '%' are floor division and modulo.
// exp/log/... of integers compute in float32.
#include <map>
#include <string>
#include <vector>

#include "frontend/expr_ast.h"
#include "frontend/expr_shapes.h"
#include "ir/tensor.h"

namespace tessera::frontend {

struct InputSpec {
  std::vector<ir::Expr> shape;  // numbers, or size variables for a shape-generic definition
  ir::DType dtype = ir::DType::kFloat32;
};

struct TeProgram {
  ir::Tensor output;
  std::vector<ir::Tensor> inputs;             // placeholders, in Program::inputs order
  std::map<std::string, ir::Tensor> tensors;  // every named tensor (inputs and statements)
};

// Builds the definitions for inputs of the given shapes and types (every input of `p` needs an
// entry). Throws ExpressionError at the column of the problem (see infer_shapes for shape
// errors; type errors such as arithmetic on a comparison are reported at their operator).
TeProgram expression_to_te(const Program& p, const std::map<std::string, InputSpec>& inputs,
                           const ExtentHints& hints = {});

// Convenience: parse + build with concrete shapes (dtype float32 unless given).
TeProgram expression_to_te(const std::string& source,
                           const std::map<std::string, std::vector<int64_t>>& shapes,
                           const std::map<std::string, ir::DType>& dtypes = {},
                           const ExtentHints& hints = {});

// Shape of the output for concrete input shapes, without building definitions.
std::vector<int64_t> expression_output_shape(
    const Program& p, const std::map<std::string, std::vector<int64_t>>& shapes,
    const ExtentHints& hints = {});

}  // namespace tessera::frontend
