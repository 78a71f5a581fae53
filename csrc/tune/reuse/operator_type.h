#pragma once
// The extent-free identity of an operator: ETO's "operator type" (Def. 2, condition 1).
//
// Two operators have the same type when their compute DAGs are equal up to renaming and to the
// sizes of their loops and tensors: a 768x768 and a 3072x768 matmul are one type; a matmul and a
// batch matmul, or two convolutions with different strides, are not. The type is computed by
// rebuilding the DAG with every tensor dimension and every iterator extent replaced by a fresh
// symbolic size (one per occurrence, all with the same range), then hashing it structurally
// (ir::structural_hash) and confirming a hash match by ir::structural_equal.
//
// Bounds checks are extents in disguise: an integer constant compared directly with an index
// expression (a padded convolution's `h < H + pad`) is abstracted too. Every other constant of a
// body is kept (a stride, a padding offset, a dilation), as is the presence of each check, so
// operators whose bodies differ otherwise are different types. A coarse type costs no
// correctness: the reuse tuner verifies every candidate against the user operator's own
// reference; it only spends trials on a source that helps less.
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/tensor.h"

namespace tessera::tune::reuse {

// A comparison of integers (EQ, NE, LT, LE, GT, GE): with a constant operand, a bounds check.
bool is_integer_comparison(const ir::ExprNode& e);

// The DAG of `outputs` with every dimension and extent replaced by a fresh size variable.
// Bodies, dtypes, reducers, padding values and the DAG's sharing are kept.
std::vector<ir::Tensor> abstract_extents(const std::vector<ir::Tensor>& outputs);

// An operator type: the extent-free DAG and its hash.
struct OperatorType {
  uint64_t hash = 0;
  std::shared_ptr<const std::vector<ir::Tensor>> dag;  // abstract_extents of the operator

  // Hash match confirmed by structural equality (hashes of distinct DAGs may collide).
  bool operator==(const OperatorType& other) const;
  bool operator!=(const OperatorType& other) const { return !(*this == other); }
};

OperatorType operator_type(const std::vector<ir::Tensor>& outputs);

}  // namespace tessera::tune::reuse
