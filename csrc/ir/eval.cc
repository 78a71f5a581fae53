#include "ir/eval.h"

#include <cmath>
#include <optional>

#include "ir/buffer.h"
#include "ir/tensor.h"
#include "util/check.h"

namespace tessera::ir {

int64_t floordiv_int(int64_t a, int64_t b) {
  TESSERA_CHECK(b != 0) << "integer division by zero";
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 traps
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

int64_t floormod_int(int64_t a, int64_t b) {
  TESSERA_CHECK(b != 0) << "integer modulo by zero";
  if (b == -1) return 0;  // INT64_MIN % -1 traps
  // Not a - floordiv(a, b) * b: that product can overflow while the result is small (the
  // fuzzer's a = -6666663333333333333, b = 6666663333333333332). r and b of opposite signs
  // cannot overflow when added.
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

namespace {

double apply_call(CallOp op, double x, double y) {
  switch (op) {
    case CallOp::kExp:
      return std::exp(x);
    case CallOp::kLog:
      return std::log(x);
    case CallOp::kSqrt:
      return std::sqrt(x);
    case CallOp::kRsqrt:
      return 1.0 / std::sqrt(x);
    case CallOp::kTanh:
      return std::tanh(x);
    case CallOp::kErf:
      return std::erf(x);
    case CallOp::kSigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case CallOp::kAbs:
      return std::fabs(x);
    case CallOp::kFloor:
      return std::floor(x);
    case CallOp::kCeil:
      return std::ceil(x);
    case CallOp::kPow:
      return std::pow(x, y);
  }
  return 0.0;
}

// NaN-propagating max/min, like torch.
// Ties keep the first operand (max(-0.0, +0.0) is -0.0), as the generated code does.
double fmax_nan(double a, double b) { return (std::isnan(a) || a >= b) ? a : b; }
double fmin_nan(double a, double b) { return (std::isnan(a) || a <= b) ? a : b; }

class Evaluator {
 public:
  Evaluator(const EvalEnv& env, bool round_fp32) : env_(env), round_fp32_(round_fp32) {}

  Scalar eval(const Expr& e) {
    Scalar r = eval_raw(e);
    if (!r.is_int && round_fp32_ && e->dtype == DType::kFloat32) {
      r.f = static_cast<double>(static_cast<float>(r.f));
    }
    return r;
  }

 private:
  Scalar eval_raw(const Expr& e) {
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::kIntImm:
        return Scalar::of_int(n.int_value);
      case ExprKind::kFloatImm:
        return Scalar::of_float(n.float_value);
      case ExprKind::kVar: {
        auto it = env_.vars.find(e.get());
        TESSERA_CHECK(it != env_.vars.end()) << "unbound variable " << n.name;
        return it->second;
      }
      case ExprKind::kNot:
        return Scalar::of_int(eval(n.operands[0]).i == 0);
      case ExprKind::kSelect:
        return eval(n.operands[0]).i ? eval(n.operands[1]) : eval(n.operands[2]);
      case ExprKind::kCast:
        return cast_to(n.dtype, eval(n.operands[0]));
      case ExprKind::kCall: {
        double x = eval(n.operands[0]).as_double();
        double y = n.operands.size() > 1 ? eval(n.operands[1]).as_double() : 0.0;
        return Scalar::of_float(apply_call(n.call_op, x, y));
      }
      case ExprKind::kAccess: {
        TESSERA_CHECK(env_.read_tensor) << "no tensor reader for access of " << n.tensor->name;
        std::vector<int64_t> idx;
        for (const Expr& o : n.operands) idx.push_back(eval(o).i);
        return env_.read_tensor(*n.tensor, idx);
      }
      case ExprKind::kLoad: {
        TESSERA_CHECK(env_.read_buffer) << "no buffer reader for load of " << n.buffer->name;
        return env_.read_buffer(*n.buffer, eval(n.operands[0]).i);
      }
      default:
        break;
    }
    // Short-circuit logic first so guarded expressions do not evaluate their unsafe side.
    if (n.kind == ExprKind::kAnd) {
      return Scalar::of_int(eval(n.operands[0]).i && eval(n.operands[1]).i);
    }
    if (n.kind == ExprKind::kOr) {
      return Scalar::of_int(eval(n.operands[0]).i || eval(n.operands[1]).i);
    }
    Scalar a = eval(n.operands[0]);
    Scalar b = eval(n.operands[1]);
    if (a.is_int && b.is_int) return wrap_to(n.dtype, int_binary(n.kind, a.i, b.i));
    return float_binary(n.kind, a.as_double(), b.as_double());
  }

  static Scalar cast_to(DType t, Scalar v) {
    if (t == DType::kBool) return Scalar::of_int(v.is_int ? v.i != 0 : v.f != 0.0);
    if (is_int(t)) {
      int64_t x = v.is_int ? v.i : static_cast<int64_t>(std::trunc(v.f));
      if (t == DType::kInt32) x = static_cast<int32_t>(x);
      return Scalar::of_int(x);
    }
    double f = v.as_double();
    if (t == DType::kFloat32) f = static_cast<float>(f);
    return Scalar::of_float(f);
  }

  // Comparisons give a 0/1 integer whatever the operands' type; nullopt for other kinds.
  template <typename T>
  static std::optional<Scalar> comparison(ExprKind k, T a, T b) {
    switch (k) {
      case ExprKind::kEQ:
        return Scalar::of_int(a == b);
      case ExprKind::kNE:
        return Scalar::of_int(a != b);
      case ExprKind::kLT:
        return Scalar::of_int(a < b);
      case ExprKind::kLE:
        return Scalar::of_int(a <= b);
      case ExprKind::kGT:
        return Scalar::of_int(a > b);
      case ExprKind::kGE:
        return Scalar::of_int(a >= b);
      default:
        return std::nullopt;
    }
  }

  // Integer results as PyTorch gives them: int32 and int64 wrap around (two's complement), and
  // bool arithmetic saturates (True + True is True: add is `or`, mul is `and`).
  static Scalar wrap_to(DType t, Scalar v) {
    if (t == DType::kBool) return Scalar::of_int(v.i != 0);
    if (t == DType::kInt32) return Scalar::of_int(static_cast<int32_t>(static_cast<uint32_t>(v.i)));
    return v;
  }

  // Two's-complement arithmetic (no signed overflow, which would be undefined here).
  static int64_t wrapping(ExprKind k, int64_t a, int64_t b) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    const uint64_t r = k == ExprKind::kAdd ? ua + ub : k == ExprKind::kSub ? ua - ub : ua * ub;
    return static_cast<int64_t>(r);
  }

  static Scalar int_binary(ExprKind k, int64_t a, int64_t b) {
    if (std::optional<Scalar> c = comparison(k, a, b)) return *c;
    switch (k) {
      case ExprKind::kAdd:
      case ExprKind::kSub:
      case ExprKind::kMul:
        return Scalar::of_int(wrapping(k, a, b));
      case ExprKind::kDiv:
      case ExprKind::kFloorDiv:
        return Scalar::of_int(floordiv_int(a, b));
      case ExprKind::kFloorMod:
        return Scalar::of_int(floormod_int(a, b));
      case ExprKind::kMin:
        return Scalar::of_int(a < b ? a : b);
      case ExprKind::kMax:
        return Scalar::of_int(a > b ? a : b);
      default:
        break;
    }
    TESSERA_FAIL() << "cannot evaluate " << expr_kind_name(k) << " on integers";
  }

  static Scalar float_binary(ExprKind k, double a, double b) {
    if (std::optional<Scalar> c = comparison(k, a, b)) return *c;
    switch (k) {
      case ExprKind::kAdd:
        return Scalar::of_float(a + b);
      case ExprKind::kSub:
        return Scalar::of_float(a - b);
      case ExprKind::kMul:
        return Scalar::of_float(a * b);
      case ExprKind::kDiv:
        return Scalar::of_float(a / b);
      case ExprKind::kMin:
        return Scalar::of_float(fmin_nan(a, b));
      case ExprKind::kMax:
        return Scalar::of_float(fmax_nan(a, b));
      default:
        break;
    }
    TESSERA_FAIL() << "cannot evaluate " << expr_kind_name(k) << " on floats";
  }

  const EvalEnv& env_;
  bool round_fp32_;
};

}  // namespace

Scalar evaluate(const Expr& e, const EvalEnv& env, bool round_fp32) {
  Evaluator ev(env, round_fp32);
  return ev.eval(e);
}

}  // namespace tessera::ir
