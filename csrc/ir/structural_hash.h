#pragma once
// Structural hashing and equality of expressions and compute DAGs, insensitive to iterator and
// tensor renaming and to the order of summation iterators (EinNet fingerprints; the tuning
// database key of a workload). A hash match must be confirmed by structural_equal, since
// summation iterators with the same range can collide.
#include <cstdint>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace tessera::ir {

// Hash of an expression; variables hash by their role/position (bound order of first use),
// not by name or identity. Free variables with the same bounds hash alike.
uint64_t structural_hash(const Expr& e);
// Hash of the compute DAG producing `outputs` (placeholders by shape/dtype/position).
uint64_t structural_hash(const std::vector<Tensor>& outputs);

// Equality up to a consistent renaming of variables and tensors (and permutation of summation
// iterators).
bool structural_equal(const Expr& a, const Expr& b);
bool structural_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b);

}  // namespace tessera::ir
