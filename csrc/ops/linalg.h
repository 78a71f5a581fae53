#pragma once
// Matrix products. Each is ONE reduce() op whose body is the product of two accesses,
//   matmul[i, j] = sum(k) A[i, k] * B[k, j]
// so that sketch rules recognise the pattern; a bias is a separate elementwise epilogue op.
#include <string>

#include "ir/tensor.h"

namespace tessera::ops {

// C[M, N] = op(A) op(B) with A[M, K] / B[K, N], or with stored layouts A[K, M] (trans_a) and
// B[N, K] (trans_b). Tag "matmul", attrs trans_a / trans_b.
ir::Tensor matmul(const ir::Tensor& a, const ir::Tensor& b, bool trans_a = false,
                  bool trans_b = false, const std::string& name = "matmul");

// C[Bt, M, N] = A[Bt, M, K] B[Bt, K, N] per batch (layouts [Bt, K, M] / [Bt, N, K] when
// transposed). Tag "batch_matmul".
ir::Tensor batch_matmul(const ir::Tensor& a, const ir::Tensor& b, bool trans_a = false,
                        bool trans_b = false, const std::string& name = "batch_matmul");

// torch.nn.functional.linear: Y[M, N] = X[M, K] W[N, K]^T (+ bias[N]). The product is the op
// `name` (tag "dense"); the bias, when given, is an elementwise op `name`_bias reading it.
ir::Tensor dense(const ir::Tensor& x, const ir::Tensor& w, const ir::Tensor& bias = nullptr,
                 const std::string& name = "dense");

}  // namespace tessera::ops
