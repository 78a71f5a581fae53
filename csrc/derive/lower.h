#pragma once
// Lowering of an operator match to Tessera's own kernels.
#include "derive/matching.h"

namespace tessera::derive {

// A program computing the matched scope's values with Tessera's own operator: operands
// gathered into [batch, m, k] / [batch, k, n] views (layout eOperators, weights folded at
// compile time), ops::matmul or ops::batch_matmul, and a view back to the scope's shape.
// A conv2d match becomes ops::conv2d over the input as stored and the kernel gathered into
// OIHW with the output channels flattened, read back into the scope's shape. Elementwise
// matches are not lowered. Evaluating the result checks the match numerically.
ir::Tensor lower_match(const OperatorMatch& m);

}  // namespace tessera::derive
