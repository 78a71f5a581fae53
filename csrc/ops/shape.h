#pragma once
// Shape and data-movement operators, each a pure index expression over its input (tag
// "injective"): they are cheap to inline into consumers.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor.h"
#include "ops/common.h"

namespace tessera::ops {

// out[i_0, .., i_{n-1}] = X[..] with out dim d = X dim perm[d] (torch.permute; negative entries
// allowed).
ir::Tensor permute(const ir::Tensor& x, const std::vector<int64_t>& perm,
                   const std::string& name = "transpose");
ir::Tensor transpose(const ir::Tensor& x, const std::vector<int64_t>& perm,
                     const std::string& name = "transpose");
// torch.transpose(x, dim0, dim1): swaps two dims.
ir::Tensor transpose(const ir::Tensor& x, int64_t dim0, int64_t dim1,
                     const std::string& name = "transpose");

// Row-major reshape; at most one dim may be the constant -1 (inferred). The input index is the
// output's flat index decomposed with floordiv/floormod, simplified.
ir::Tensor reshape(const ir::Tensor& x, const Shape& new_shape,
                   const std::string& name = "reshape");

// Concatenation along `axis` as a chain of selects on the axis index.
ir::Tensor concat(const std::vector<ir::Tensor>& xs, int64_t axis,
                  const std::string& name = "concat");

// x[.., start:end:step, ..] along `axis` (python semantics: negative start/end count from the
// end, out-of-range bounds clamp; step >= 1). With a symbolic dim, start/end must be in range or
// negative (counted from the end); the default end means "to the end".
constexpr int64_t kSliceEnd = std::numeric_limits<int64_t>::max();
ir::Tensor slice(const ir::Tensor& x, int64_t axis, int64_t start, int64_t end = kSliceEnd,
                 int64_t step = 1, const std::string& name = "slice");

// Constant padding: pads[d] = (before, after) for every dim d (both >= 0).
ir::Tensor pad(const ir::Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads,
               double value = 0.0, const std::string& name = "pad");

// numpy.broadcast_to.
ir::Tensor broadcast_to(const ir::Tensor& x, const Shape& shape,
                        const std::string& name = "broadcast_to");

}  // namespace tessera::ops
