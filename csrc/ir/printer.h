#pragma once
// Human-readable text for expressions, compute definitions and loop IR.
#include <ostream>
#include <string>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace tessera::ir {

std::string to_string(const Expr& e);
// The compute definition of `t` and, recursively, of the computed tensors it reads, e.g.
//   C[i, j] = sum(k: 0..K) A[i, k] * B[k, j]
std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Expr& e);

}  // namespace tessera::ir
