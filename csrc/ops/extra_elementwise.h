#pragma once
// Elementwise operators the torch.compile backend needs beyond the core library: comparisons and
// logic (bool results), clamp, rounding, and tensors that read no input (full, arange).
// Broadcasting and dtype rules are those of ops/elementwise.h: tensor operands of one op share a
// dtype (the importer casts first, following torch's type promotion).
#include <optional>
#include <string>

#include "ir/tensor.h"
#include "ops/common.h"

namespace tessera::ops {

enum class Compare : uint8_t { kEQ, kNE, kLT, kLE, kGT, kGE };
// "eq", "ne", "lt", "le", "gt", "ge" -> Compare (throws tessera::Error on other names).
Compare compare_from_name(const std::string& name);

// out = a <cmp> b as a bool tensor.
ir::Tensor compare(const ir::Tensor& a, const ir::Tensor& b, Compare cmp,
                   const std::string& name = "compare");
// out = a <cmp> scalar; the scalar takes a's dtype (a bool tensor compares with 0/1).
ir::Tensor compare(const ir::Tensor& a, double b, Compare cmp, const std::string& name = "compare");

// Logic on any dtype (non-zero is true); results are bool.
ir::Tensor logical_and(const ir::Tensor& a, const ir::Tensor& b,
                       const std::string& name = "logical_and");
ir::Tensor logical_or(const ir::Tensor& a, const ir::Tensor& b,
                      const std::string& name = "logical_or");
ir::Tensor logical_not(const ir::Tensor& x, const std::string& name = "logical_not");

// torch.clamp with optional scalar bounds (NaN propagates like torch only for the compared
// operand order max(min(x, hi), lo); an empty bound is no bound).
ir::Tensor clamp(const ir::Tensor& x, std::optional<double> lo, std::optional<double> hi,
                 const std::string& name = "clamp");

// Rounding of float tensors toward -inf / +inf.
ir::Tensor floor(const ir::Tensor& x, const std::string& name = "floor");
ir::Tensor ceil(const ir::Tensor& x, const std::string& name = "ceil");

// Integer floor division and its remainder (Python's // and %: the quotient rounds toward
// -inf, the remainder takes the divisor's sign), with broadcasting; both operands share an
// integer dtype. A zero divisor sets the kernel's division status (ZeroDivisionError) and
// INT_MIN // -1 wraps, as in csrc/loop/guard_division.h.
ir::Tensor floordiv(const ir::Tensor& a, const ir::Tensor& b, const std::string& name = "floordiv");
ir::Tensor floormod(const ir::Tensor& a, const ir::Tensor& b, const std::string& name = "floormod");
// A tensor of `shape` filled with `value` (tag "elementwise": it reads nothing and is inlined
// into its consumers).
ir::Tensor full(const Shape& shape, double value, ir::DType dtype,
                const std::string& name = "full");

// torch.arange(start, start + n*step, step): out[i] = start + i * step, in `dtype` (computed in
// double for floats, in int64 for integers, then converted).
ir::Tensor arange(const ir::Expr& n, double start, double step, ir::DType dtype,
                  const std::string& name = "arange");

}  // namespace tessera::ops
