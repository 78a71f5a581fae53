#pragma once
// Normalisation layers, written as chains of simple ops (reductions + elementwise) that the
// scheduler can fuse; each intermediate is a named tensor <name>_<step>.
#include <cstdint>
#include <string>

#include "ir/tensor.h"

namespace tessera::ops {

// Numerically stable softmax over `axis` (negative allowed), four ops:
//   <name>_max = max over axis;  <name>_exp = exp(x - max);  <name>_sum = sum of exp over axis;
//   <name> = exp / sum.
ir::Tensor softmax(const ir::Tensor& x, int64_t axis = -1, const std::string& name = "softmax");

// log_softmax over `axis`, three ops:
//   <name>_max;  <name>_sum = sum of exp(x - max) over axis;  <name> = x - max - log(sum).
ir::Tensor log_softmax(const ir::Tensor& x, int64_t axis = -1,
                       const std::string& name = "log_softmax");

// torch.nn.functional.layer_norm over the last `normalized_ndim` dims, with optional gamma
// (weight) and beta (bias) of the normalized shape. Biased variance, two-pass (stable):
//   <name>_sum, <name>_mean = sum / n, <name>_var_sum = sum (x - mean)^2,
//   <name>_rstd = rsqrt(var_sum / n + eps), <name> = (x - mean) * rstd * gamma + beta.
ir::Tensor layer_norm(const ir::Tensor& x, int64_t normalized_ndim,
                      const ir::Tensor& gamma = nullptr, const ir::Tensor& beta = nullptr,
                      double eps = 1e-5, const std::string& name = "layer_norm");

}  // namespace tessera::ops
