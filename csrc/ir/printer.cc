#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ir/buffer.h"

namespace tessera::ir {

namespace {

// Binding strength, loosest first; parentheses are printed only where the tree needs them.
enum Prec : int {
  kPrecOr = 1,
  kPrecAnd,
  kPrecCompare,
  kPrecAdd,
  kPrecMul,
  kPrecUnary,
  kPrecAtom,
};

int precedence(const Expr& e) {
  switch (e->kind) {
    case ExprKind::kOr:
      return kPrecOr;
    case ExprKind::kAnd:
      return kPrecAnd;
    case ExprKind::kEQ:
    case ExprKind::kNE:
    case ExprKind::kLT:
    case ExprKind::kLE:
    case ExprKind::kGT:
    case ExprKind::kGE:
      return kPrecCompare;
    case ExprKind::kAdd:
    case ExprKind::kSub:
      if (e->kind == ExprKind::kSub && e->operands[0]->is_const_int(0) && is_int(e->dtype)) {
        return kPrecUnary;  // printed as -x
      }
      return kPrecAdd;
    case ExprKind::kMul:
    case ExprKind::kDiv:
    case ExprKind::kFloorDiv:
    case ExprKind::kFloorMod:
      return kPrecMul;
    case ExprKind::kNot:
      return kPrecUnary;
    case ExprKind::kIntImm:
      return e->int_value < 0 ? kPrecUnary : kPrecAtom;
    case ExprKind::kFloatImm:
      return std::signbit(e->float_value) ? kPrecUnary : kPrecAtom;
    default:
      return kPrecAtom;
  }
}

const char* binary_symbol(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd:
      return " + ";
    case ExprKind::kSub:
      return " - ";
    case ExprKind::kMul:
      return " * ";
    case ExprKind::kDiv:
      return " / ";
    case ExprKind::kFloorDiv:
      return " // ";
    case ExprKind::kFloorMod:
      return " % ";
    case ExprKind::kEQ:
      return " == ";
    case ExprKind::kNE:
      return " != ";
    case ExprKind::kLT:
      return " < ";
    case ExprKind::kLE:
      return " <= ";
    case ExprKind::kGT:
      return " > ";
    case ExprKind::kGE:
      return " >= ";
    case ExprKind::kAnd:
      return " && ";
    case ExprKind::kOr:
      return " || ";
    default:
      return " ? ";
  }
}

// Shortest decimal text that reads back to the same value in the constant's precision.
std::string format_float(double v, DType t) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  const bool single = t != DType::kFloat64;
  char buf[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    double back = std::strtod(buf, nullptr);
    if (single ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

class ExprPrinter {
 public:
  explicit ExprPrinter(std::ostream& os) : os_(os) {}

  void print(const Expr& e) {
    if (!e.defined()) {
      os_ << "<undefined>";
      return;
    }
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::kIntImm:
        if (n.dtype == DType::kBool) {
          os_ << (n.int_value ? "true" : "false");
        } else {
          os_ << n.int_value;
        }
        return;
      case ExprKind::kFloatImm:
        if (n.dtype == DType::kFloat32) {
          os_ << format_float(n.float_value, n.dtype);
        } else {
          os_ << dtype_name(n.dtype) << "(" << format_float(n.float_value, n.dtype) << ")";
        }
        return;
      case ExprKind::kVar:
        if (n.name.empty()) {
          os_ << "v" << n.var_id;
        } else {
          os_ << n.name;
        }
        return;
      case ExprKind::kNot:
        os_ << "!";
        operand(n.operands[0], kPrecUnary);
        return;
      case ExprKind::kMin:
      case ExprKind::kMax:
        call_like(n.kind == ExprKind::kMin ? "min" : "max", n.operands);
        return;
      case ExprKind::kSelect:
        call_like("select", n.operands);
        return;
      case ExprKind::kCast:
        call_like(dtype_name(n.dtype), n.operands);
        return;
      case ExprKind::kCall:
        call_like(call_op_name(n.call_op), n.operands);
        return;
      case ExprKind::kAccess:
        os_ << (n.tensor ? n.tensor->name : "<null>");
        list(n.operands, "[", "]");
        return;
      case ExprKind::kLoad:
        os_ << (n.buffer ? n.buffer->name : "<null>");
        list(n.operands, "[", "]");
        return;
      default:
        break;
    }
    // Binary operators.
    if (n.kind == ExprKind::kSub && n.operands[0]->is_const_int(0) && is_int(n.dtype)) {
      os_ << "-";
      operand(n.operands[1], kPrecUnary);
      return;
    }
    int p = precedence(e);
    // Left-associative: the left operand may bind as loosely as this node, the right one must
    // bind tighter (a - (b - c) keeps its parentheses). Comparisons do not chain.
    operand(n.operands[0], p == kPrecCompare ? p + 1 : p);
    os_ << binary_symbol(n.kind);
    operand(n.operands[1], p + 1);
  }

 private:
  void operand(const Expr& e, int min_prec) {
    if (precedence(e) < min_prec) {
      os_ << "(";
      print(e);
      os_ << ")";
    } else {
      print(e);
    }
  }

  void list(const std::vector<Expr>& xs, const char* open, const char* close) {
    os_ << open;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i) os_ << ", ";
      print(xs[i]);
    }
    os_ << close;
  }

  void call_like(const char* name, const std::vector<Expr>& args) {
    os_ << name;
    list(args, "(", ")");
  }

  std::ostream& os_;
};

void print_shape(std::ostream& os, const std::vector<Expr>& shape) {
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) os << ", ";
    ExprPrinter(os).print(shape[i]);
  }
  os << "]";
}

void print_compute(std::ostream& os, const Tensor& t) {
  const ComputeOpNode& op = *t->op;
  ExprPrinter p(os);
  os << t->name << "[";
  for (size_t i = 0; i < op.axes.size(); ++i) {
    if (i) os << ", ";
    p.print(op.axes[i].var);
  }
  os << "] = ";
  if (op.reduce != ReduceKind::kNone) {
    os << reduce_kind_name(op.reduce) << "(";
    for (size_t i = 0; i < op.reduce_axes.size(); ++i) {
      if (i) os << ", ";
      p.print(op.reduce_axes[i].var);
      os << ": 0..";
      p.print(op.reduce_axes[i].extent);
    }
    os << ") ";
  }
  p.print(op.body);
}

}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  ExprPrinter(os).print(e);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  ExprPrinter(os).print(e);
  return os;
}

std::string to_string(const Tensor& t) {
  if (!t) return "<null tensor>";
  std::ostringstream os;
  TensorDAG dag = collect_dag({t});
  for (const Tensor& p : dag.placeholders) {
    os << "placeholder " << p->name << ": " << dtype_name(p->dtype);
    print_shape(os, p->shape);
    os << "\n";
  }
  for (const Tensor& c : dag.computes) {
    print_compute(os, c);
    os << "\n";
  }
  std::string s = os.str();
  if (!s.empty()) s.pop_back();  // no trailing newline
  return s;
}

}  // namespace tessera::ir
