#include "ops/extra_elementwise.h"

#include <cmath>

#include "ops/elementwise.h"
#include "util/check.h"

namespace tessera::ops {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

Expr compare_expr(Compare cmp, const Expr& a, const Expr& b) {
  switch (cmp) {
    case Compare::kEQ:
      return ir::eq(a, b);
    case Compare::kNE:
      return ir::ne(a, b);
    case Compare::kLT:
      return ir::lt(a, b);
    case Compare::kLE:
      return ir::le(a, b);
    case Compare::kGT:
      return ir::gt(a, b);
    case Compare::kGE:
      return ir::ge(a, b);
  }
  TESSERA_FAIL() << "unknown comparison";
  return Expr();
}

// Non-zero test that leaves bool values alone.
Expr truth(const Expr& v) {
  return v->dtype == DType::kBool ? v : ir::ne(v, ir::make_const(v->dtype, 0));
}

// A bool-valued elementwise op over two broadcast operands (binary_op needs equal dtypes and
// keeps the operand dtype, so the result tensor is built here).
Tensor bool_binary(const Tensor& a, const Tensor& b, const std::string& name,
                   const std::function<Expr(Expr, Expr)>& f) {
  TESSERA_CHECK(a != nullptr && b != nullptr) << name << ": operand is null";
  const Shape shape = broadcast_shape(a->shape, b->shape, name);
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        return f(ir::access(a, broadcast_index(a, shape, v)),
                 ir::access(b, broadcast_index(b, shape, v)));
      },
      "elementwise");
}

}  // namespace

namespace {
Tensor integer_binary(const Tensor& a, const Tensor& b, const std::string& name,
                      Expr (*f)(Expr, Expr)) {
  TESSERA_CHECK(a != nullptr && b != nullptr) << name << ": operand is null";
  check_same_dtype(a, b, name);
  TESSERA_CHECK(ir::is_int(a->dtype)) << name << ": integer operands only, got "
                                      << ir::dtype_name(a->dtype);
  return binary_op(a, b, name, f);
}
}  // namespace

Tensor floordiv(const Tensor& a, const Tensor& b, const std::string& name) {
  return integer_binary(a, b, name, &ir::floordiv);
}

Tensor floormod(const Tensor& a, const Tensor& b, const std::string& name) {
  return integer_binary(a, b, name, &ir::floormod);
}

Compare compare_from_name(const std::string& name) {
  if (name == "eq") return Compare::kEQ;
  if (name == "ne") return Compare::kNE;
  if (name == "lt") return Compare::kLT;
  if (name == "le") return Compare::kLE;
  if (name == "gt") return Compare::kGT;
  if (name == "ge") return Compare::kGE;
  TESSERA_FAIL() << "unknown comparison '" << name << "' (eq, ne, lt, le, gt, ge)";
  return Compare::kEQ;
}

Tensor compare(const Tensor& a, const Tensor& b, Compare cmp, const std::string& name) {
  TESSERA_CHECK(a != nullptr && b != nullptr) << name << ": operand is null";
  check_same_dtype(a, b, name);
  return bool_binary(a, b, name, [cmp](Expr x, Expr y) { return compare_expr(cmp, x, y); });
}

Tensor compare(const Tensor& a, double b, Compare cmp, const std::string& name) {
  TESSERA_CHECK(a != nullptr) << name << ": operand is null";
  // A bool tensor compares as 0/1 integers so that `mask == 1` means what it says.
  const DType t = a->dtype == DType::kBool ? DType::kInt64 : a->dtype;
  const Expr c = ir::make_const(t, b);
  return ir::compute(
      name, a->shape,
      [&](const std::vector<Var>& v) {
        Expr x = ir::access(a, std::vector<Expr>(v.begin(), v.end()));
        if (x->dtype != t) x = ir::cast(t, x);
        return compare_expr(cmp, x, c);
      },
      "elementwise");
}

Tensor logical_and(const Tensor& a, const Tensor& b, const std::string& name) {
  return bool_binary(a, b, name,
                     [](Expr x, Expr y) { return ir::logical_and(truth(x), truth(y)); });
}

Tensor logical_or(const Tensor& a, const Tensor& b, const std::string& name) {
  return bool_binary(a, b, name, [](Expr x, Expr y) { return ir::logical_or(truth(x), truth(y)); });
}

Tensor logical_not(const Tensor& x, const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": operand is null";
  return ir::compute(
      name, x->shape,
      [&](const std::vector<Var>& v) {
        return ir::logical_not(truth(ir::access(x, std::vector<Expr>(v.begin(), v.end()))));
      },
      "elementwise");
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi,
             const std::string& name) {
  TESSERA_CHECK(x != nullptr) << name << ": operand is null";
  return unary_op(x, name, [&](Expr v) {
    if (hi) v = ir::min(v, ir::make_const(x->dtype, *hi));
    if (lo) v = ir::max(v, ir::make_const(x->dtype, *lo));
    return v;
  });
}

Tensor floor(const Tensor& x, const std::string& name) {
  TESSERA_CHECK(x != nullptr && ir::is_float(x->dtype)) << name << ": needs a float operand";
  return unary_op(x, name, [](Expr v) { return ir::call(ir::CallOp::kFloor, {v}); });
}

Tensor ceil(const Tensor& x, const std::string& name) {
  TESSERA_CHECK(x != nullptr && ir::is_float(x->dtype)) << name << ": needs a float operand";
  return unary_op(x, name, [](Expr v) { return ir::call(ir::CallOp::kCeil, {v}); });
}

Tensor full(const Shape& shape, double value, DType dtype, const std::string& name) {
  const Expr c = ir::make_const(dtype, value);
  return ir::compute(
      name, shape, [&](const std::vector<Var>&) { return c; }, "elementwise");
}

Tensor arange(const Expr& n, double start, double step, DType dtype, const std::string& name) {
  return ir::compute(
      name, {n},
      [&](const std::vector<Var>& v) {
        if (ir::is_float(dtype)) {
          Expr i = ir::cast(DType::kFloat64, v[0]);
          Expr val = ir::add(ir::make_const(DType::kFloat64, start),
                             ir::mul(i, ir::make_const(DType::kFloat64, step)));
          return dtype == DType::kFloat64 ? val : ir::cast(dtype, val);
        }
        TESSERA_CHECK(std::floor(start) == start && std::floor(step) == step)
            << name << ": integer arange needs integer start and step";
        Expr val = ir::add(ir::int_imm(static_cast<int64_t>(start)),
                           ir::mul(v[0], ir::int_imm(static_cast<int64_t>(step))));
        return dtype == ir::kIndexType ? val : ir::cast(dtype, val);
      },
      "elementwise");
}

}  // namespace tessera::ops
