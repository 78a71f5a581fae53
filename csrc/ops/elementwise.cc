#include "ops/elementwise.h"

#include "util/check.h"

namespace tessera::ops {

using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {
const char* kTag = "elementwise";

void check_float(const Tensor& x, const std::string& op) {
  TESSERA_CHECK(ir::is_float(x->dtype))
      << op << ": needs a float operand, " << x->name << " is " << ir::dtype_name(x->dtype);
}

std::vector<Expr> index_of(const std::vector<Var>& v) { return {v.begin(), v.end()}; }
}  // namespace

Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    // Position i counted from the right in each operand.
    const bool has_a = i < a.size(), has_b = i < b.size();
    const Expr da = has_a ? a[a.size() - 1 - i] : Expr();
    const Expr db = has_b ? b[b.size() - 1 - i] : Expr();
    Expr d;
    if (!has_a || is_const_value(da, 1)) {
      d = has_b ? db : da;
    } else if (!has_b || is_const_value(db, 1)) {
      d = da;
    } else {
      auto ca = const_value(da), cb = const_value(db);
      TESSERA_CHECK(!(ca && cb && *ca != *cb))
          << op << ": shapes " << shape_str(a) << " and " << shape_str(b)
          << " cannot be broadcast (dim " << *ca << " vs " << *cb << ")";
      d = ca ? da : db;  // prefer the constant: it is what a matching symbolic dim must equal
    }
    out[n - 1 - i] = d;
  }
  return out;
}

std::vector<Expr> broadcast_index(const Tensor& t, const Shape& out_shape,
                                  const std::vector<Var>& idx) {
  TESSERA_CHECK(t->ndim() <= static_cast<int>(out_shape.size()))
      << "broadcast: " << t->name << shape_str(t->shape) << " has more dims than "
      << shape_str(out_shape);
  const size_t skip = out_shape.size() - t->shape.size();
  std::vector<Expr> out;
  for (size_t d = 0; d < t->shape.size(); ++d) {
    const bool broadcast =
        is_const_value(t->shape[d], 1) && !is_const_value(out_shape[skip + d], 1);
    out.push_back(broadcast ? ir::int_imm(0) : Expr(idx[skip + d]));
  }
  return out;
}

Tensor unary_op(const Tensor& a, const std::string& name, const std::function<Expr(Expr)>& f) {
  TESSERA_CHECK(a != nullptr) << name << ": operand is null";
  return ir::compute(
      name, a->shape, [&](const std::vector<Var>& v) { return f(ir::access(a, index_of(v))); },
      kTag);
}

Tensor binary_op(const Tensor& a, const Tensor& b, const std::string& name,
                 const std::function<Expr(Expr, Expr)>& f) {
  TESSERA_CHECK(a != nullptr && b != nullptr) << name << ": operand is null";
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shape(a->shape, b->shape, name);
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        return f(ir::access(a, broadcast_index(a, shape, v)),
                 ir::access(b, broadcast_index(b, shape, v)));
      },
      kTag);
}

// Each binary op is defined once on Exprs; the three overloads wrap it.
#define TESSERA_DEFINE_BINARY_OP(fn, float_only, expr)                          \
  namespace {                                                                   \
  Expr fn##_expr(Expr x, Expr y) { return expr; }                               \
  void fn##_check(const Tensor& t, const std::string& name) {                   \
    if (float_only) check_float(t, name);                                       \
  }                                                                             \
  }                                                                             \
  Tensor fn(const Tensor& a, const Tensor& b, const std::string& name) {        \
    TESSERA_CHECK(a != nullptr && b != nullptr) << name << ": operand is null"; \
    fn##_check(a, name);                                                        \
    return binary_op(a, b, name, fn##_expr);                                    \
  }                                                                             \
  Tensor fn(const Tensor& a, double b, const std::string& name) {               \
    TESSERA_CHECK(a != nullptr) << name << ": operand is null";                 \
    fn##_check(a, name);                                                        \
    const Expr c = ir::make_const(a->dtype, b);                                 \
    return unary_op(a, name, [&](Expr x) { return fn##_expr(x, c); });          \
  }                                                                             \
  Tensor fn(double a, const Tensor& b, const std::string& name) {               \
    TESSERA_CHECK(b != nullptr) << name << ": operand is null";                 \
    fn##_check(b, name);                                                        \
    const Expr c = ir::make_const(b->dtype, a);                                 \
    return unary_op(b, name, [&](Expr y) { return fn##_expr(c, y); });          \
  }

TESSERA_DEFINE_BINARY_OP(add, false, x + y)
TESSERA_DEFINE_BINARY_OP(sub, false, x - y)
TESSERA_DEFINE_BINARY_OP(mul, false, x* y)
TESSERA_DEFINE_BINARY_OP(div, true, ir::div(x, y))
TESSERA_DEFINE_BINARY_OP(maximum, false, ir::max(x, y))
TESSERA_DEFINE_BINARY_OP(minimum, false, ir::min(x, y))
TESSERA_DEFINE_BINARY_OP(pow, true, ir::call(ir::CallOp::kPow, {x, y}))
#undef TESSERA_DEFINE_BINARY_OP

namespace {
// 0 - v. (Not ir's unary operator-, whose argument evaluation order can move `v` away before
// reading its dtype.)
Expr negate(const Expr& v) { return ir::neg(v); }
}  // namespace

Tensor neg(const Tensor& x, const std::string& name) {
  return unary_op(x, name, [](Expr v) { return negate(v); });
}

Tensor abs(const Tensor& x, const std::string& name) {
  if (ir::is_float(x->dtype)) {
    return unary_op(x, name, [](Expr v) { return ir::call(ir::CallOp::kAbs, {v}); });
  }
  // Integers: no math call; |v| = max(v, -v).
  return unary_op(x, name, [](Expr v) { return ir::max(v, negate(v)); });
}

Tensor relu(const Tensor& x, const std::string& name) {
  return unary_op(x, name, [](Expr v) { return ir::relu(v); });
}

#define TESSERA_DEFINE_FLOAT_UNARY_OP(fn, expr)                 \
  Tensor fn(const Tensor& x, const std::string& name) {         \
    TESSERA_CHECK(x != nullptr) << name << ": operand is null"; \
    check_float(x, name);                                       \
    return unary_op(x, name, [](Expr v) { return expr; });      \
  }
TESSERA_DEFINE_FLOAT_UNARY_OP(gelu, ir::gelu(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(tanh, ir::tanh(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(exp, ir::exp(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(log, ir::log(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(sqrt, ir::sqrt(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(rsqrt, ir::call(ir::CallOp::kRsqrt, {v}))
TESSERA_DEFINE_FLOAT_UNARY_OP(sigmoid, ir::sigmoid(v))
TESSERA_DEFINE_FLOAT_UNARY_OP(erf, ir::erf(v))
#undef TESSERA_DEFINE_FLOAT_UNARY_OP

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const std::string& name) {
  TESSERA_CHECK(cond != nullptr && a != nullptr && b != nullptr) << name << ": operand is null";
  check_same_dtype(a, b, name);
  const Shape shape = broadcast_shape(broadcast_shape(cond->shape, a->shape, name), b->shape, name);
  return ir::compute(
      name, shape,
      [&](const std::vector<Var>& v) {
        Expr c = ir::access(cond, broadcast_index(cond, shape, v));
        if (c->dtype != ir::DType::kBool) c = ir::ne(c, ir::make_const(c->dtype, 0));
        return ir::select(c, ir::access(a, broadcast_index(a, shape, v)),
                          ir::access(b, broadcast_index(b, shape, v)));
      },
      kTag);
}

Tensor cast(const Tensor& x, ir::DType dtype, const std::string& name) {
  return unary_op(x, name, [dtype](Expr v) { return ir::cast(dtype, v); });
}

}  // namespace tessera::ops
