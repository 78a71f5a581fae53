#pragma once
// Elementwise operators with numpy/torch broadcasting (tag "elementwise").
//
// Broadcasting aligns shapes at the right; a dim broadcasts when it is the constant 1. Two
// constant dims must be equal otherwise (tessera::Error). Symbolic dims are trusted to match
// the other operand (a size variable that is 1 at run time does not broadcast).
// Binary operands must have the same dtype; scalar overloads take a double and use the tensor's
// dtype for it.
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "ops/common.h"

namespace tessera::ops {

// Result shape of broadcasting `a` with `b` (throws on incompatible constant dims).
Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& op = "broadcast");
// Index into `t` for a point `idx` of the broadcast result shape `out_shape`.
std::vector<ir::Expr> broadcast_index(const ir::Tensor& t, const Shape& out_shape,
                                      const std::vector<ir::Var>& idx);

// Generic builders: out = f(a[..]) and out = f(a[..], b[..]) with broadcasting.
ir::Tensor unary_op(const ir::Tensor& a, const std::string& name,
                    const std::function<ir::Expr(ir::Expr)>& f);
ir::Tensor binary_op(const ir::Tensor& a, const ir::Tensor& b, const std::string& name,
                     const std::function<ir::Expr(ir::Expr, ir::Expr)>& f);

// ---- binary (tensor, tensor), (tensor, scalar), (scalar, tensor) ----
#define TESSERA_DECLARE_BINARY_OP(fn)                                                     \
  ir::Tensor fn(const ir::Tensor& a, const ir::Tensor& b, const std::string& name = #fn); \
  ir::Tensor fn(const ir::Tensor& a, double b, const std::string& name = #fn);            \
  ir::Tensor fn(double a, const ir::Tensor& b, const std::string& name = #fn);
TESSERA_DECLARE_BINARY_OP(add)
TESSERA_DECLARE_BINARY_OP(sub)
TESSERA_DECLARE_BINARY_OP(mul)
TESSERA_DECLARE_BINARY_OP(div)  // true division; float operands only
TESSERA_DECLARE_BINARY_OP(maximum)
TESSERA_DECLARE_BINARY_OP(minimum)
TESSERA_DECLARE_BINARY_OP(pow)  // float operands only
#undef TESSERA_DECLARE_BINARY_OP

// ---- unary ----
ir::Tensor neg(const ir::Tensor& x, const std::string& name = "neg");
ir::Tensor abs(const ir::Tensor& x, const std::string& name = "abs");
ir::Tensor relu(const ir::Tensor& x, const std::string& name = "relu");
// Float operands only:
ir::Tensor gelu(const ir::Tensor& x, const std::string& name = "gelu");  // exact erf form
ir::Tensor tanh(const ir::Tensor& x, const std::string& name = "tanh");
ir::Tensor exp(const ir::Tensor& x, const std::string& name = "exp");
ir::Tensor log(const ir::Tensor& x, const std::string& name = "log");
ir::Tensor sqrt(const ir::Tensor& x, const std::string& name = "sqrt");
ir::Tensor rsqrt(const ir::Tensor& x, const std::string& name = "rsqrt");
ir::Tensor sigmoid(const ir::Tensor& x, const std::string& name = "sigmoid");
ir::Tensor erf(const ir::Tensor& x, const std::string& name = "erf");

// where(cond, a, b): cond is a bool tensor (any other dtype is compared with 0); all three
// broadcast together; a and b must share a dtype.
ir::Tensor where(const ir::Tensor& cond, const ir::Tensor& a, const ir::Tensor& b,
                 const std::string& name = "where");
// Elementwise dtype conversion (float to int truncates toward zero).
ir::Tensor cast(const ir::Tensor& x, ir::DType dtype, const std::string& name = "cast");

}  // namespace tessera::ops
