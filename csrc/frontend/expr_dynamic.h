#pragma once
// Dynamic sizes of tessera.op(..., dynamic={name: (lo, hi)}): each name stands for some input
// dims, which become one size variable with that range, so that one DietCode-tuned kernel
// serves every size in the range (tune/dynamic).
#include <string>
#include <vector>

#include "frontend/expr_ast.h"

namespace tessera::frontend {

struct InputDim {
  int input = 0;  // index into Program::inputs
  int dim = 0;
};

// The input dims `name` stands for: an iterator names every input dim that some statement
// indexes with it alone (A[.., i, ..]); "T.size(d)" names dim d of input T. Throws
// ExpressionError when it names no input dim (an unknown name, an iterator used only in index
// arithmetic, a dim out of range).
std::vector<InputDim> dynamic_dims(const Program& p, const std::string& name);

}  // namespace tessera::frontend
