#pragma once
// Reductions over chosen axes (torch.sum/mean/amax/amin semantics).
//
// `axes` may be negative and must be distinct; an EMPTY list reduces over all axes. With keepdim
// the reduced dims stay as extent-1 dims. Each is ONE reduce op (tag "reduce"), except mean,
// which is the sum followed by an elementwise op dividing by the number of reduced elements.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::ops {

ir::Tensor reduce_sum(const ir::Tensor& x, const std::vector<int64_t>& axes = {},
                      bool keepdim = false, const std::string& name = "sum");
ir::Tensor reduce_mean(const ir::Tensor& x, const std::vector<int64_t>& axes = {},
                       bool keepdim = false, const std::string& name = "mean");
ir::Tensor reduce_max(const ir::Tensor& x, const std::vector<int64_t>& axes = {},
                      bool keepdim = false, const std::string& name = "max");
ir::Tensor reduce_min(const ir::Tensor& x, const std::vector<int64_t>& axes = {},
                      bool keepdim = false, const std::string& name = "min");

// The shared builder: one reduce op of `kind` over `axes` (normalised as above).
ir::Tensor reduce_axes(const ir::Tensor& x, const std::vector<int64_t>& axes, bool keepdim,
                       ir::ReduceKind kind, const std::string& name);

}  // namespace tessera::ops
