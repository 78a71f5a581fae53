#include "ir/expr.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <optional>

#include "ir/buffer.h"
#include "ir/eval.h"
#include "ir/tensor.h"
#include "util/check.h"

namespace tessera::ir {

namespace {

std::shared_ptr<ExprNode> new_node(ExprKind kind, DType dtype) {
  auto n = std::make_shared<ExprNode>();
  n->kind = kind;
  n->dtype = dtype;
  return n;
}

// Lifts an integer constant to the float type of the other operand, so `x * 2` works for floats.
void unify_types(Expr& a, Expr& b) {
  if (a->dtype == b->dtype) return;
  if (a->kind == ExprKind::kIntImm && is_float(b->dtype)) {
    a = float_imm(static_cast<double>(a->int_value), b->dtype);
  } else if (b->kind == ExprKind::kIntImm && is_float(a->dtype)) {
    b = float_imm(static_cast<double>(b->int_value), a->dtype);
  } else if (a->kind == ExprKind::kFloatImm && is_float(b->dtype)) {
    a = float_imm(a->float_value, b->dtype);
  } else if (b->kind == ExprKind::kFloatImm && is_float(a->dtype)) {
    b = float_imm(b->float_value, a->dtype);
  } else if (a->kind == ExprKind::kIntImm && is_int(b->dtype)) {
    a = int_imm(a->int_value, b->dtype);
  } else if (b->kind == ExprKind::kIntImm && is_int(a->dtype)) {
    b = int_imm(b->int_value, a->dtype);
  }
  TESSERA_CHECK(a->dtype == b->dtype) << "operand types differ: " << dtype_name(a->dtype) << " vs "
                                      << dtype_name(b->dtype) << " (insert a cast)";
}

bool both_int_consts(const Expr& a, const Expr& b) {
  return a->kind == ExprKind::kIntImm && b->kind == ExprKind::kIntImm;
}

// Whether v is a value of integer type t exactly. Folding keeps exact results only: one that
// overflows the type is left as a node, and eval and codegen give it the wrap-around PyTorch gives.
bool representable(int64_t v, DType t) {
  if (t == DType::kBool) return v == 0 || v == 1;
  if (t == DType::kInt32) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  }
  return true;
}

// a op b for op in {add, sub, mul}, when it is exact in a's type; nullopt otherwise.
std::optional<int64_t> exact_fold(ExprKind op, const Expr& a, const Expr& b) {
  if (!both_int_consts(a, b)) return std::nullopt;
  int64_t r = 0;
  const int64_t x = a->int_value, y = b->int_value;
  const bool overflow = op == ExprKind::kAdd   ? __builtin_add_overflow(x, y, &r)
                        : op == ExprKind::kSub ? __builtin_sub_overflow(x, y, &r)
                                               : __builtin_mul_overflow(x, y, &r);
  if (overflow || !representable(r, a->dtype)) return std::nullopt;
  return r;
}

// Division folds only where it cannot trap or overflow (INT64_MIN / -1 does both).
bool exact_division(const Expr& a, const Expr& b) {
  return both_int_consts(a, b) && b->int_value != 0 && b->int_value != -1;
}

Expr binary(ExprKind kind, Expr a, Expr b) {
  TESSERA_CHECK(a.defined() && b.defined()) << "undefined operand to " << expr_kind_name(kind);
  unify_types(a, b);
  DType t = is_comparison(kind) ? DType::kBool : a->dtype;
  return make_node(kind, t, {std::move(a), std::move(b)});
}

}  // namespace

Expr::Expr(int value) : Expr(int_imm(value)) {}
Expr::Expr(int64_t value) : Expr(int_imm(value)) {}
Expr::Expr(double value) : Expr(float_imm(value)) {}

const char* call_op_name(CallOp op) {
  switch (op) {
    case CallOp::kExp:
      return "exp";
    case CallOp::kLog:
      return "log";
    case CallOp::kSqrt:
      return "sqrt";
    case CallOp::kRsqrt:
      return "rsqrt";
    case CallOp::kTanh:
      return "tanh";
    case CallOp::kErf:
      return "erf";
    case CallOp::kSigmoid:
      return "sigmoid";
    case CallOp::kAbs:
      return "abs";
    case CallOp::kFloor:
      return "floor";
    case CallOp::kCeil:
      return "ceil";
    case CallOp::kPow:
      return "pow";
  }
  return "?";
}

int call_op_arity(CallOp op) { return op == CallOp::kPow ? 2 : 1; }

const char* expr_kind_name(ExprKind k) {
  switch (k) {
    case ExprKind::kIntImm:
      return "IntImm";
    case ExprKind::kFloatImm:
      return "FloatImm";
    case ExprKind::kVar:
      return "Var";
    case ExprKind::kAdd:
      return "Add";
    case ExprKind::kSub:
      return "Sub";
    case ExprKind::kMul:
      return "Mul";
    case ExprKind::kDiv:
      return "Div";
    case ExprKind::kFloorDiv:
      return "FloorDiv";
    case ExprKind::kFloorMod:
      return "FloorMod";
    case ExprKind::kMin:
      return "Min";
    case ExprKind::kMax:
      return "Max";
    case ExprKind::kEQ:
      return "EQ";
    case ExprKind::kNE:
      return "NE";
    case ExprKind::kLT:
      return "LT";
    case ExprKind::kLE:
      return "LE";
    case ExprKind::kGT:
      return "GT";
    case ExprKind::kGE:
      return "GE";
    case ExprKind::kAnd:
      return "And";
    case ExprKind::kOr:
      return "Or";
    case ExprKind::kNot:
      return "Not";
    case ExprKind::kSelect:
      return "Select";
    case ExprKind::kCast:
      return "Cast";
    case ExprKind::kCall:
      return "Call";
    case ExprKind::kAccess:
      return "Access";
    case ExprKind::kLoad:
      return "Load";
  }
  return "?";
}

bool is_binary(ExprKind k) {
  return k >= ExprKind::kAdd && k <= ExprKind::kOr && k != ExprKind::kNot;
}

bool is_comparison(ExprKind k) { return k >= ExprKind::kEQ && k <= ExprKind::kGE; }

Expr int_imm(int64_t v, DType t) {
  auto n = new_node(ExprKind::kIntImm, t);
  n->int_value = v;
  return Expr(n);
}

Expr float_imm(double v, DType t) {
  auto n = new_node(ExprKind::kFloatImm, t);
  n->float_value = v;
  return Expr(n);
}

Expr bool_imm(bool v) { return int_imm(v ? 1 : 0, DType::kBool); }

Expr make_const(DType t, double v) {
  if (is_float(t)) return float_imm(v, t);
  return int_imm(static_cast<int64_t>(v), t);
}

Var var(const std::string& name, int64_t lo, int64_t hi, DType t) {
  static std::atomic<uint64_t> next_id{1};
  auto n = new_node(ExprKind::kVar, t);
  n->name = name;
  n->lo = lo;
  n->hi = hi;
  n->var_id = next_id.fetch_add(1);
  return Expr(n);
}

Var size_var(const std::string& name, int64_t lo, int64_t hi) {
  TESSERA_CHECK(lo >= 0) << "size variable " << name << " must be non-negative";
  TESSERA_CHECK(lo <= hi) << "size variable " << name << ": empty range [" << lo << ", " << hi
                          << "]";
  return var(name, lo, hi, kIndexType);
}

Expr make_node(ExprKind kind, DType dtype, std::vector<Expr> operands) {
  auto n = new_node(kind, dtype);
  n->operands = std::move(operands);
  return Expr(n);
}

Expr with_operands(const Expr& e, std::vector<Expr> operands) {
  auto n = std::make_shared<ExprNode>(*e);
  n->operands = std::move(operands);
  return Expr(n);
}

Expr add(Expr a, Expr b) {
  if (auto r = exact_fold(ExprKind::kAdd, a, b)) return int_imm(*r, a->dtype);
  if (a->is_const_int(0) && is_int(b->dtype)) return b;
  if (b->is_const_int(0) && is_int(a->dtype)) return a;
  return binary(ExprKind::kAdd, std::move(a), std::move(b));
}

Expr sub(Expr a, Expr b) {
  if (auto r = exact_fold(ExprKind::kSub, a, b)) return int_imm(*r, a->dtype);
  if (b->is_const_int(0) && is_int(a->dtype)) return a;
  return binary(ExprKind::kSub, std::move(a), std::move(b));
}

Expr mul(Expr a, Expr b) {
  if (auto r = exact_fold(ExprKind::kMul, a, b)) return int_imm(*r, a->dtype);
  if (is_int(a->dtype) || is_int(b->dtype)) {
    if (a->is_const_int(1)) return b;
    if (b->is_const_int(1)) return a;
    if (a->is_const_int(0) && is_int(b->dtype)) return a;
    if (b->is_const_int(0) && is_int(a->dtype)) return b;
  }
  return binary(ExprKind::kMul, std::move(a), std::move(b));
}

Expr div(Expr a, Expr b) {
  Expr r = binary(ExprKind::kDiv, std::move(a), std::move(b));
  TESSERA_CHECK(is_float(r->dtype)) << "div() is float division; use floordiv() for integers";
  return r;
}

Expr floordiv(Expr a, Expr b) {
  if (exact_division(a, b)) {
    return int_imm(floordiv_int(a->int_value, b->int_value), a->dtype);
  }
  if (b->is_const_int(1)) return a;
  Expr r = binary(ExprKind::kFloorDiv, std::move(a), std::move(b));
  TESSERA_CHECK(is_int(r->dtype)) << "floordiv() needs integer operands";
  return r;
}

Expr floormod(Expr a, Expr b) {
  if (exact_division(a, b)) {
    return int_imm(floormod_int(a->int_value, b->int_value), a->dtype);
  }
  if (b->is_const_int(1)) return int_imm(0, a->dtype);
  Expr r = binary(ExprKind::kFloorMod, std::move(a), std::move(b));
  TESSERA_CHECK(is_int(r->dtype)) << "floormod() needs integer operands";
  return r;
}

Expr min(Expr a, Expr b) {
  if (both_int_consts(a, b)) return a->int_value <= b->int_value ? a : b;
  return binary(ExprKind::kMin, std::move(a), std::move(b));
}

Expr max(Expr a, Expr b) {
  if (both_int_consts(a, b)) return a->int_value >= b->int_value ? a : b;
  return binary(ExprKind::kMax, std::move(a), std::move(b));
}

Expr eq(Expr a, Expr b) { return binary(ExprKind::kEQ, std::move(a), std::move(b)); }
Expr ne(Expr a, Expr b) { return binary(ExprKind::kNE, std::move(a), std::move(b)); }
Expr lt(Expr a, Expr b) {
  if (both_int_consts(a, b)) return bool_imm(a->int_value < b->int_value);
  return binary(ExprKind::kLT, std::move(a), std::move(b));
}
Expr le(Expr a, Expr b) {
  if (both_int_consts(a, b)) return bool_imm(a->int_value <= b->int_value);
  return binary(ExprKind::kLE, std::move(a), std::move(b));
}
Expr gt(Expr a, Expr b) { return lt(std::move(b), std::move(a)); }
Expr ge(Expr a, Expr b) { return le(std::move(b), std::move(a)); }

Expr logical_and(Expr a, Expr b) {
  if (a->kind == ExprKind::kIntImm) return a->int_value ? b : a;
  if (b->kind == ExprKind::kIntImm) return b->int_value ? a : b;
  return binary(ExprKind::kAnd, std::move(a), std::move(b));
}

Expr logical_or(Expr a, Expr b) {
  if (a->kind == ExprKind::kIntImm) return a->int_value ? a : b;
  if (b->kind == ExprKind::kIntImm) return b->int_value ? b : a;
  return binary(ExprKind::kOr, std::move(a), std::move(b));
}

Expr logical_not(Expr a) {
  if (a->kind == ExprKind::kIntImm) return bool_imm(a->int_value == 0);
  return make_node(ExprKind::kNot, DType::kBool, {std::move(a)});
}

Expr select(Expr cond, Expr t, Expr f) {
  TESSERA_CHECK(cond->dtype == DType::kBool) << "select condition must be bool";
  if (cond->kind == ExprKind::kIntImm) return cond->int_value ? t : f;
  unify_types(t, f);
  DType dt = t->dtype;
  return make_node(ExprKind::kSelect, dt, {std::move(cond), std::move(t), std::move(f)});
}

Expr cast(DType t, Expr v) {
  if (v->dtype == t) return v;
  if (v->kind == ExprKind::kIntImm) return make_const(t, static_cast<double>(v->int_value));
  if (v->kind == ExprKind::kFloatImm && is_float(t)) return float_imm(v->float_value, t);
  return make_node(ExprKind::kCast, t, {std::move(v)});
}

Expr call(CallOp op, std::vector<Expr> args) {
  TESSERA_CHECK(static_cast<int>(args.size()) == call_op_arity(op))
      << call_op_name(op) << " takes " << call_op_arity(op) << " operand(s)";
  if (args.size() == 2) unify_types(args[0], args[1]);
  TESSERA_CHECK(is_float(args[0]->dtype)) << call_op_name(op) << " needs a float operand";
  auto n = new_node(ExprKind::kCall, args[0]->dtype);
  n->call_op = op;
  n->operands = std::move(args);
  return Expr(n);
}

Expr access(const Tensor& t, std::vector<Expr> indices) {
  TESSERA_CHECK(t != nullptr) << "access of a null tensor";
  TESSERA_CHECK(indices.size() == t->shape.size())
      << "tensor " << t->name << " has " << t->shape.size() << " dims, accessed with "
      << indices.size() << " indices";
  auto n = new_node(ExprKind::kAccess, t->dtype);
  n->tensor = t;
  n->operands = std::move(indices);
  return Expr(n);
}

Expr load(const Buffer& b, Expr flat_index) {
  TESSERA_CHECK(b != nullptr) << "load from a null buffer";
  auto n = new_node(ExprKind::kLoad, b->dtype);
  n->buffer = b;
  n->operands = {std::move(flat_index)};
  return Expr(n);
}

Expr exp(Expr x) { return call(CallOp::kExp, {std::move(x)}); }
Expr log(Expr x) { return call(CallOp::kLog, {std::move(x)}); }
Expr sqrt(Expr x) { return call(CallOp::kSqrt, {std::move(x)}); }
Expr tanh(Expr x) { return call(CallOp::kTanh, {std::move(x)}); }
Expr erf(Expr x) { return call(CallOp::kErf, {std::move(x)}); }
Expr sigmoid(Expr x) { return call(CallOp::kSigmoid, {std::move(x)}); }
Expr relu(Expr x) { return max(x, make_const(x->dtype, 0.0)); }
Expr neg(Expr x) {
  const DType t = x->dtype;
  return sub(make_const(t, is_float(t) ? -0.0 : 0.0), std::move(x));
}
Expr gelu(Expr x) {
  DType t = x->dtype;
  Expr half = make_const(t, 0.5);
  Expr one = make_const(t, 1.0);
  Expr inv_sqrt2 = make_const(t, 0.7071067811865476);
  return half * x * (one + erf(x * inv_sqrt2));
}

}  // namespace tessera::ir
