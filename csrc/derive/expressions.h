#pragma once
// Tensor algebra expressions in EinNet's form, where a read outside a tensor's shape gives 0
// (the padding is implicit, not a pad stage): the shapes derivation starts from. Compiling one
// takes derive::explicit_padding first (choose.h).
#include <cstdint>
#include <string>

#include "ir/tensor.h"

namespace tessera::derive {

// O[n, f, h, w] = sum(c, r, s) X[n, c, h*stride + r*dil - pad, w*stride + s*dil - pad] *
// K[f, c, r, s] (NCHW / OIHW, as torch's conv2d with one group).
ir::Tensor conv2d_expr(const ir::Tensor& x, const ir::Tensor& k, int64_t stride, int64_t pad,
                       int64_t dil, const std::string& name = "conv");

// torch's conv_transpose2d (X[N, C, H, W], K[C, F, R, S], one group, no output padding) as a sum
// over input positions: O[n, f, oh, ow] = sum(c, ih, iw) X[n, c, ih, iw] *
// K[c, f, oh + pad - ih*stride, ow + pad - iw*stride].
ir::Tensor conv_transpose2d_expr(const ir::Tensor& x, const ir::Tensor& k, int64_t stride,
                                 int64_t pad);

// Longformer's dilated band product (G2BMM): O[b, m, w] = sum(k) A[b, m, k] *
// B[b, m + dilation * (w - half), k] for w in [0, 2*half + 1). With b_k_major, B is given as
// [b, k, n] and read B[b, k, m + dilation * (w - half)], as EinNet writes G2BMM (its Table 2).
ir::Tensor g2bmm_expr(const ir::Tensor& a, const ir::Tensor& b, int64_t half, int64_t dilation,
                      bool b_k_major = false);

}  // namespace tessera::derive
