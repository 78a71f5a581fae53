#pragma once
// The naive reference interpreter of compute definitions: the ground truth that generated
// kernels are checked against. It evaluates every compute tensor of the DAG fully, producers
// first, point by point with ir::evaluate, in double precision (int64 for integer tensors);
// results are converted to the output dtypes only at the end. Slow by design: it has no
// cleverness that could be wrong.
#include <cstdint>
#include <map>
#include <vector>

#include "ir/tensor.h"
#include "runtime/ndarray.h"

namespace tessera::ops {

struct ReferenceOptions {
  // By default a read outside a tensor's shape is an error (a bug in the definition). Layout
  // rewrites that rely on TensorNode::pad_value may enable this to read pad_value instead.
  bool out_of_bounds_reads_pad_value = false;
};

// `inputs` must hold an array for every placeholder the outputs depend on, with the
// placeholder's dtype. Symbolic sizes come from `size_values`; a size variable that is itself a
// dim of a placeholder and is not given there is taken from the input array's shape. Throws
// tessera::Error on missing inputs, shape/dtype mismatches, unbound sizes and out-of-bounds
// reads.
std::vector<runtime::NDArray> run_reference(
    const std::vector<ir::Tensor>& outputs,
    const std::map<const ir::TensorNode*, runtime::NDArray>& inputs,
    const std::map<const ir::ExprNode*, int64_t>& size_values = {},
    const ReferenceOptions& options = {});

}  // namespace tessera::ops
