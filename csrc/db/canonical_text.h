#pragma once
// Canonical text of a compute DAG: the confirmation half of the tuning database's key.
//
// Two workloads that differ only by tensor/iterator names or by the order of their summation
// iterators print to the same text; any other difference (an index, a constant, a dtype, a shape,
// a size range, the order of the kernel's inputs) prints differently. The structural hash finds
// candidate records quickly; comparing this text confirms them, since distinct workloads may
// share a hash (same-range summation iterators can collide, and 64 bits can always collide).
//
// Names in the text: tensors are t<k> (placeholders first, in first-visit order, then computes in
// topological order), traversal iterators a<k> (output position), summation iterators r<k> (in
// order of first use in the body, so the order of the op's reduce_axes list does not matter), and
// symbolic sizes n<k> (in order of first use, declared with their dtype and range).
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::db {

struct CanonicalForm {
  std::string text;    // the whole DAG, one line per tensor plus sizes, outputs and inputs
  std::string shapes;  // "float32[n0,16];float32[16,24]->float32[n0,24]|n0=int64[1,10000]"
  // Canonical tensor id -> the tensor of this workload (to translate schedules' names).
  std::vector<ir::Tensor> tensors;
  // Canonical tensor id -> for each canonical summation position, the index into that tensor's
  // op->reduce_axes (empty for placeholders).
  std::vector<std::vector<int>> reduce_order;
};

// `inputs` is the kernel's argument order; it is part of the text (two kernels taking the same
// tensors in a different order are different workloads for a stored schedule).
CanonicalForm canonicalize(const std::vector<ir::Tensor>& outputs,
                           const std::vector<ir::Tensor>& inputs);

}  // namespace tessera::db
