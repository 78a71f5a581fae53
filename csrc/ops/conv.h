#pragma once
// 2-D convolutions in NCHW layout with OIHW weights (torch.nn.functional semantics).
//
// Structure of the definitions (what sketch rules see):
//   X_pad   = pad op (tag "pad"), only when padding is non-zero; zero outside the input
//   conv2d  = ONE reduce op over (rc, ry, rx) (tag "conv2d", attrs stride/padding/dilation/groups)
//   <name>_bias = elementwise epilogue adding bias[o], only when a bias is given
#include <string>

#include "ir/tensor.h"
#include "ops/common.h"

namespace tessera::ops {

// X[N, C, H, W], W[O, C/groups, KH, KW], bias[O] -> [N, O, OH, OW] with
// OH = (H + 2*pad_h - dil_h*(KH-1) - 1) / stride_h + 1. groups == C is depthwise (attr
// "depthwise" = "1"); when each group has one input channel the rc iterator is left out.
ir::Tensor conv2d(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor& bias = nullptr,
                  Int2 stride = {1, 1}, Int2 padding = {0, 0}, Int2 dilation = {1, 1},
                  int64_t groups = 1, const std::string& name = "conv2d");

// torch.nn.functional.conv_transpose2d: X[N, C, H, W], W[C, O/groups, KH, KW], bias[O] ->
// [N, O, OH, OW] with OH = (H-1)*stride_h - 2*pad_h + dil_h*(KH-1) + output_padding_h + 1.
// Formulated as a stride-1 convolution with flipped, transposed weights over the input dilated
// by the stride and padded by dil*(K-1) - pad (one "pad" op), so the reduction (tag
// "conv_transpose2d") has the plain convolution access pattern on its input.
ir::Tensor conv_transpose2d(const ir::Tensor& x, const ir::Tensor& w,
                            const ir::Tensor& bias = nullptr, Int2 stride = {1, 1},
                            Int2 padding = {0, 0}, Int2 output_padding = {0, 0},
                            Int2 dilation = {1, 1}, int64_t groups = 1,
                            const std::string& name = "conv_transpose2d");

}  // namespace tessera::ops
