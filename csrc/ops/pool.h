#pragma once
// 2-D pooling in NCHW layout, with torch.nn.functional semantics (output size, ceil_mode window
// dropping, count_include_pad divisors).
//
// Structure: an optional pad op (tag "pad"; zeros for avg, -inf for max) covering every window,
// then ONE reduce op over (ry, rx) ("pool_max" = max reduction; "pool_avg" = sum reduction),
// and for average pooling an elementwise op dividing by the window size.
#include <string>

#include "ir/tensor.h"
#include "ops/common.h"

namespace tessera::ops {

// X[N, C, H, W] -> [N, C, OH, OW]. stride defaults to kernel (as torch) when given as {0, 0}.
// Padding must be at most half the kernel (torch's rule). With count_include_pad the divisor
// counts padding positions inside [-pad, H + pad); without it only real input positions.
ir::Tensor avg_pool2d(const ir::Tensor& x, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                      bool ceil_mode = false, bool count_include_pad = true,
                      const std::string& name = "avg_pool2d");

// X[N, C, H, W] -> [N, C, OH, OW]; padding positions never win (they are -inf).
ir::Tensor max_pool2d(const ir::Tensor& x, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                      Int2 dilation = {1, 1}, bool ceil_mode = false,
                      const std::string& name = "max_pool2d");

}  // namespace tessera::ops
