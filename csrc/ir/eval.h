#pragma once
// Direct evaluation of expressions on concrete values: the ground truth for simplifier fuzzing
// and the naive reference interpreter of compute definitions.
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "ir/expr.h"

namespace tessera::ir {

// A concrete scalar. Integers (incl. bool) are exact in `i`; floats in `f` (double precision, so
// references computed this way are more accurate than the fp32 kernels they check).
struct Scalar {
  bool is_int = true;
  int64_t i = 0;
  double f = 0.0;
  static Scalar of_int(int64_t v) { return Scalar{true, v, 0.0}; }
  static Scalar of_float(double v) { return Scalar{false, 0, v}; }
  double as_double() const { return is_int ? static_cast<double>(i) : f; }
};

struct EvalEnv {
  std::unordered_map<const ExprNode*, Scalar> vars;
  // Reads tensor element tensor[indices] for kAccess nodes.
  std::function<Scalar(const TensorNode& tensor, const std::vector<int64_t>& indices)> read_tensor;
  // Reads buffer[flat_index] for kLoad nodes.
  std::function<Scalar(const BufferNode& buffer, int64_t flat_index)> read_buffer;
};

// Evaluates `e`; throws tessera::Error for unbound variables, missing readers and division by 0.
// Float results are rounded to the expression's dtype when it is float32 only if `round_fp32`.
Scalar evaluate(const Expr& e, const EvalEnv& env, bool round_fp32 = false);

int64_t floordiv_int(int64_t a, int64_t b);
int64_t floormod_int(int64_t a, int64_t b);
// a + b wrapping around in two's complement, as PyTorch's int64 arithmetic does (no signed
// overflow, which would be undefined).
int64_t wrapping_add(int64_t a, int64_t b);

}  // namespace tessera::ir
