#include "codegen/cuda/cuda_expr.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>

#include "ir/simplify.h"
#include "ir/tensor.h"
#include "util/check.h"

namespace tessera::codegen::cuda {

using ir::DType;
using ir::Expr;
using ir::ExprKind;

const char* scalar_type(DType t) {
  switch (t) {
    case DType::kBool:
      return "bool";
    case DType::kInt32:
      return "int";
    case DType::kInt64:
      return "long long";
    case DType::kFloat32:
      return "float";
    case DType::kFloat64:
      return "double";
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  TESSERA_FAIL() << "CUDA codegen: dtype " << ir::dtype_name(t) << " is not supported yet";
}

const char* element_type(DType t) { return t == DType::kBool ? "unsigned char" : scalar_type(t); }

// ---- Names ----------------------------------------------------------------------------------

namespace {

// Identifiers the kernel text uses itself (keywords, CUDA built-ins, the math functions calls
// map to); an IR name equal to one of them gets a suffix. Names starting with "tessera_" (the
// prelude's helpers) or "__" (reserved in C) do too.
bool is_reserved(const std::string& s) {
  static const std::set<std::string> kReserved = {"auto",
                                                  "bool",
                                                  "break",
                                                  "char",
                                                  "const",
                                                  "continue",
                                                  "default",
                                                  "do",
                                                  "double",
                                                  "else",
                                                  "extern",
                                                  "float",
                                                  "for",
                                                  "if",
                                                  "int",
                                                  "long",
                                                  "return",
                                                  "short",
                                                  "signed",
                                                  "sizeof",
                                                  "static",
                                                  "true",
                                                  "false",
                                                  "unsigned",
                                                  "void",
                                                  "volatile",
                                                  "while",
                                                  "blockIdx",
                                                  "threadIdx",
                                                  "blockDim",
                                                  "gridDim",
                                                  "warpSize",
                                                  "min",
                                                  "max",
                                                  "exp",
                                                  "expf",
                                                  "log",
                                                  "logf",
                                                  "sqrt",
                                                  "sqrtf",
                                                  "tanh",
                                                  "tanhf",
                                                  "erf",
                                                  "erff",
                                                  "fabs",
                                                  "fabsf",
                                                  "floor",
                                                  "floorf",
                                                  "ceil",
                                                  "ceilf",
                                                  "pow",
                                                  "powf",
                                                  "__int_as_float",
                                                  "__longlong_as_double"};
  return kReserved.count(s) > 0 || s.rfind("tessera_", 0) == 0 || s.rfind("__", 0) == 0;
}

std::string sanitize(const std::string& ir_name) {
  std::string s;
  for (char c : ir_name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    s += ok ? c : '_';
  }
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s = "v" + s;
  return s;
}

}  // namespace

std::string Names::unique(const std::string& ir_name) {
  const std::string base = sanitize(ir_name);
  std::string name = base;
  for (int n = 1; is_reserved(name) || taken_.count(name); ++n)
    name = base + "_" + std::to_string(n);
  taken_.insert(name);
  return name;
}

const std::string& Names::bind(const ir::ExprNode* var, const std::string& ir_name) {
  return vars_[var] = unique(ir_name);
}

const std::string& Names::bind(const ir::BufferNode* buf, const std::string& ir_name) {
  return buffers_[buf] = unique(ir_name);
}

const std::string& Names::of(const ir::ExprNode* var) const {
  auto it = vars_.find(var);
  TESSERA_CHECK(it != vars_.end()) << "CUDA codegen: variable " << var->name << " is not bound";
  return it->second;
}

const std::string& Names::of(const ir::BufferNode* buf) const {
  auto it = buffers_.find(buf);
  TESSERA_CHECK(it != buffers_.end()) << "CUDA codegen: buffer " << buf->name << " is not bound";
  return it->second;
}

// ---- expressions ----------------------------------------------------------------------------

namespace {

std::string int_literal(int64_t v, DType t) {
  if (t == DType::kBool) return v ? "true" : "false";
  const char* suffix = t == DType::kInt64 ? "LL" : "";
  // The most negative value has no literal of its own: its negation overflows.
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1LL)";
  if (t == DType::kInt32 && v == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
  const std::string digits = std::to_string(v < 0 ? -v : v) + suffix;
  return v < 0 ? "(-" + digits + ")" : digits;
}

// Exact literals: finite values as hexadecimal floats, others from their bit patterns.
std::string float_literal(double v, DType t) {
  char buf[64];
  if (t == DType::kFloat32) {
    const float f = static_cast<float>(v);
    if (std::isfinite(f)) {
      std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
    } else {
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      std::snprintf(buf, sizeof buf, "__int_as_float(0x%08xu)", bits);
    }
  } else {
    if (std::isfinite(v)) {
      std::snprintf(buf, sizeof buf, "%a", v);
    } else {
      uint64_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      std::snprintf(buf, sizeof buf, "__longlong_as_double(0x%016llxLL)",
                    static_cast<unsigned long long>(bits));
    }
  }
  return std::string("(") + buf + ")";
}

const char* binary_operator(ExprKind k) {
  switch (k) {
    case ExprKind::kAdd:
      return "+";
    case ExprKind::kSub:
      return "-";
    case ExprKind::kMul:
      return "*";
    case ExprKind::kDiv:
      return "/";
    case ExprKind::kEQ:
      return "==";
    case ExprKind::kNE:
      return "!=";
    case ExprKind::kLT:
      return "<";
    case ExprKind::kLE:
      return "<=";
    case ExprKind::kGT:
      return ">";
    case ExprKind::kGE:
      return ">=";
    case ExprKind::kAnd:
      return "&&";
    case ExprKind::kOr:
      return "||";
    default:
      return nullptr;
  }
}

// Name of a float math function in CUDA's math library for dtype `t` ("expf" / "exp").
std::string math_fn(const char* base, DType t) {
  return t == DType::kFloat32 ? std::string(base) + "f" : std::string(base);
}

class ExprEmitter {
 public:
  explicit ExprEmitter(const Names& names,
                       const std::map<const ir::ExprNode*, std::string>* bound = nullptr)
      : names_(names), bound_(bound) {}

  std::string emit(const Expr& e) {
    if (bound_ != nullptr) {
      auto it = bound_->find(e.get());
      if (it != bound_->end()) return it->second;
    }
    switch (e->kind) {
      case ExprKind::kIntImm:
        return int_literal(e->int_value, e->dtype);
      case ExprKind::kFloatImm:
        return float_literal(e->float_value, e->dtype);
      case ExprKind::kVar:
        return names_.of(e.get());
      case ExprKind::kNot:
        return "(!" + emit(e->operands[0]) + ")";
      case ExprKind::kSelect:
        return "(" + emit(e->operands[0]) + " ? " + emit(e->operands[1]) + " : " +
               emit(e->operands[2]) + ")";
      case ExprKind::kCast:
        return emit_cast(e->operands[0], e->dtype);
      case ExprKind::kCall:
        return emit_call(e);
      case ExprKind::kAccess:
        TESSERA_FAIL() << "CUDA codegen: tensor access "
                       << (e->tensor ? e->tensor->name : std::string("?"))
                       << "[...] in loop IR (lowering turns accesses into loads)";
      case ExprKind::kLoad:
        return emit_load(e);
      default:
        return emit_binary(e);
    }
  }

 private:
  std::string emit_cast(const Expr& v, DType to) {
    if (v->dtype == to) return emit(v);
    if (to == DType::kBool) return "(" + emit(v) + " != 0)";
    return std::string("((") + scalar_type(to) + ")" + emit(v) + ")";
  }

  std::string emit_load(const Expr& e) {
    TESSERA_CHECK(e->buffer != nullptr && e->operands.size() == 1) << "malformed load";
    std::string s = names_.of(e->buffer.get()) + "[" + emit(e->operands[0]) + "]";
    return e->buffer->dtype == DType::kBool ? "(" + s + " != 0)" : s;
  }

  std::string emit_binary(const Expr& e) {
    TESSERA_CHECK(e->operands.size() == 2) << ir::expr_kind_name(e->kind) << " needs two operands";
    const DType t = e->operands[0]->dtype;
    const std::string a = emit(e->operands[0]), b = emit(e->operands[1]);
    const bool floor_op = e->kind == ExprKind::kFloorDiv || e->kind == ExprKind::kFloorMod;
    TESSERA_CHECK(!floor_op || ir::is_int(t))
        << "CUDA codegen: " << ir::expr_kind_name(e->kind) << " needs integer operands";
    // With a dividend known >= 0 and a divisor known >= 1, C's truncating / and % are the floor
    // ones (index arithmetic, nearly always): no sign fix-up for nvcc to prove away.
    const bool plain = floor_op && ir::const_int_bound(e->operands[0]).lo >= 0 &&
                       ir::const_int_bound(e->operands[1]).lo >= 1;
    switch (e->kind) {
      case ExprKind::kFloorDiv:
        return plain ? "(" + a + " / " + b + ")" : "tessera_floordiv(" + a + ", " + b + ")";
      case ExprKind::kFloorMod:
        return plain ? "(" + a + " % " + b + ")" : "tessera_floormod(" + a + ", " + b + ")";
      case ExprKind::kMin:
      case ExprKind::kMax:
        return emit_min_max(e->kind == ExprKind::kMax, t, a, b);
      default:
        break;
    }
    // Bool arithmetic saturates as in PyTorch (True + True is True).
    if (t == DType::kBool && e->kind == ExprKind::kAdd) return "(" + a + " || " + b + ")";
    if (t == DType::kBool && e->kind == ExprKind::kMul) return "(" + a + " && " + b + ")";
    const char* op = binary_operator(e->kind);
    TESSERA_CHECK(op != nullptr) << "CUDA codegen: no translation for "
                                 << ir::expr_kind_name(e->kind);
    // int32 data arithmetic wraps as in PyTorch; signed overflow is undefined in C, unsigned
    // arithmetic is not.
    const bool wraps =
        e->kind == ExprKind::kAdd || e->kind == ExprKind::kSub || e->kind == ExprKind::kMul;
    if (t == DType::kInt32 && wraps) {
      return "((int)((unsigned)" + a + " " + op + " (unsigned)" + b + "))";
    }
    return "(" + a + " " + op + " " + b + ")";
  }

  static std::string emit_min_max(bool is_max, DType t, const std::string& a,
                                  const std::string& b) {
    if (ir::is_float(t))
      return std::string(is_max ? "tessera_fmax(" : "tessera_fmin(") + a + ", " + b + ")";
    return "(" + a + (is_max ? " > " : " < ") + b + " ? " + a + " : " + b + ")";
  }

  std::string emit_call(const Expr& e) {
    TESSERA_CHECK(static_cast<int>(e->operands.size()) == ir::call_op_arity(e->call_op))
        << ir::call_op_name(e->call_op) << " called with " << e->operands.size() << " operand(s)";
    const DType t = e->dtype;
    TESSERA_CHECK(ir::is_float(t)) << ir::call_op_name(e->call_op) << " needs a float type";
    const std::string x = emit_cast(e->operands[0], t);
    const std::string one = t == DType::kFloat32 ? "1.0f" : "1.0";
    switch (e->call_op) {
      case ir::CallOp::kExp:
        return math_fn("exp", t) + "(" + x + ")";
      case ir::CallOp::kLog:
        return math_fn("log", t) + "(" + x + ")";
      case ir::CallOp::kSqrt:
        return math_fn("sqrt", t) + "(" + x + ")";
      case ir::CallOp::kRsqrt:  // 1/sqrt as ir::evaluate (CUDA's rsqrtf is less accurate)
        return "(" + one + " / " + math_fn("sqrt", t) + "(" + x + "))";
      case ir::CallOp::kTanh:
        return math_fn("tanh", t) + "(" + x + ")";
      case ir::CallOp::kErf:
        return math_fn("erf", t) + "(" + x + ")";
      case ir::CallOp::kSigmoid:
        return "(" + one + " / (" + one + " + " + math_fn("exp", t) + "(-" + x + ")))";
      case ir::CallOp::kAbs:
        return math_fn("fabs", t) + "(" + x + ")";
      case ir::CallOp::kFloor:
        return math_fn("floor", t) + "(" + x + ")";
      case ir::CallOp::kCeil:
        return math_fn("ceil", t) + "(" + x + ")";
      case ir::CallOp::kPow:
        return math_fn("pow", t) + "(" + x + ", " + emit_cast(e->operands[1], t) + ")";
    }
    TESSERA_FAIL() << "CUDA codegen: unsupported call " << ir::call_op_name(e->call_op);
  }

  const Names& names_;
  const std::map<const ir::ExprNode*, std::string>* bound_;  // nodes printed as their constant
};

bool is_leaf(const Expr& e) {
  return e->kind == ExprKind::kIntImm || e->kind == ExprKind::kFloatImm ||
         e->kind == ExprKind::kVar;
}

// Hash-consing of an expression: nodes equal in kind, type, value and operands (structurally,
// with variables by identity) share one id, whether or not the IR shares their node.
class ValueNumbering {
 public:
  int number(const Expr& e) {
    auto known = id_of_.find(e.get());
    if (known != id_of_.end()) return known->second;
    Key key{static_cast<int>(e->kind),
            static_cast<int>(e->dtype),
            e->int_value,
            0,
            static_cast<int>(e->call_op),
            e->buffer.get(),
            e->tensor.get(),
            nullptr,
            {}};
    std::memcpy(&key.float_bits, &e->float_value, sizeof(double));
    if (e->kind == ExprKind::kVar) key.var = e.get();
    for (const Expr& o : e->operands) key.operands.push_back(number(o));
    auto [it, fresh] = id_by_key_.emplace(std::move(key), static_cast<int>(nodes_.size()));
    if (fresh) nodes_.push_back(e);
    id_of_[e.get()] = it->second;
    return it->second;
  }
  const Expr& node(int id) const { return nodes_[id]; }
  int size() const { return static_cast<int>(nodes_.size()); }
  const std::map<const ir::ExprNode*, int>& ids() const { return id_of_; }

 private:
  struct Key {
    int kind, dtype;
    int64_t int_value;
    uint64_t float_bits;
    int call_op;
    const void* buffer;
    const void* tensor;
    const void* var;
    std::vector<int> operands;
    bool operator<(const Key& o) const {
      return std::tie(kind, dtype, int_value, float_bits, call_op, buffer, tensor, var, operands) <
             std::tie(o.kind, o.dtype, o.int_value, o.float_bits, o.call_op, o.buffer, o.tensor,
                      o.var, o.operands);
    }
  };
  std::map<const ir::ExprNode*, int> id_of_;
  std::map<Key, int> id_by_key_;
  std::vector<Expr> nodes_;  // one representative per id, producers before users
};

// The values every evaluation computes: reached from `id` without passing a select's branch.
void always_computed(const ValueNumbering& vn, int id, std::vector<bool>* always) {
  if ((*always)[id]) return;
  (*always)[id] = true;
  const Expr& e = vn.node(id);
  for (size_t i = 0; i < e->operands.size(); ++i) {
    if (e->kind == ExprKind::kSelect && i > 0) continue;
    always_computed(vn, vn.ids().at(e->operands[i].get()), always);
  }
}

}  // namespace

std::string cuda_expr(const Expr& e, const Names& names) { return ExprEmitter(names).emit(e); }

namespace {

// A select branch with a math call or more than this many values gets a scope of its own (an
// if/else) where its shared values are bound; lighter branches print inline.
constexpr size_t kScopedBranchValues = 16;

bool heavy_branch(const Expr& e) {
  std::set<const ir::ExprNode*> seen;
  bool calls = false;
  std::function<void(const Expr&)> walk = [&](const Expr& n) {
    if (!seen.insert(n.get()).second) return;
    calls = calls || n->kind == ExprKind::kCall;
    for (const Expr& o : n->operands) walk(o);
  };
  walk(e);
  return calls || seen.size() > kScopedBranchValues;
}

using Bound = std::map<const ir::ExprNode*, std::string>;

// Binds e's shared values (and heavy selects, as if/else) in a scope whose lines go to `lines`
// with `indent`; `bound` holds what enclosing scopes bound. Returns e's C expression.
std::string bind_in_scope(const Expr& e, Names& names, Bound bound, const std::string& indent,
                          std::vector<std::string>* lines) {
  ValueNumbering vn;
  const int root = vn.number(e);
  // Operand slots reading each value, over distinct values (a + a reads a twice).
  std::vector<int> uses(vn.size(), 0);
  for (int id = 0; id < vn.size(); ++id) {
    for (const Expr& o : vn.node(id)->operands) ++uses[vn.ids().at(o.get())];
  }
  std::vector<bool> always(vn.size(), false);
  always_computed(vn, root, &always);
  std::vector<std::vector<const ir::ExprNode*>> nodes_of(vn.size());
  for (const auto& [node, id] : vn.ids()) nodes_of[id].push_back(node);
  ExprEmitter emitter(names, &bound);
  for (int id = 0; id < vn.size(); ++id) {  // producers first
    const Expr& n = vn.node(id);
    if (bound.count(n.get()) || is_leaf(n) || !always[id]) continue;
    if (n->kind == ExprKind::kAccess) continue;  // refused by emit() with its message
    const bool scoped = n->kind == ExprKind::kSelect &&
                        (heavy_branch(n->operands[1]) || heavy_branch(n->operands[2]));
    if (!scoped && (id == root || uses[id] < 2)) continue;
    const std::string name = names.unique("t");
    const std::string type = scalar_type(n->dtype);
    if (scoped) {
      lines->push_back(indent + type + " " + name + ";");
      lines->push_back(indent + "if (" + emitter.emit(n->operands[0]) + ") {");
      const std::string yes = bind_in_scope(n->operands[1], names, bound, indent + "  ", lines);
      lines->push_back(indent + "  " + name + " = " + yes + ";");
      lines->push_back(indent + "} else {");
      const std::string no = bind_in_scope(n->operands[2], names, bound, indent + "  ", lines);
      lines->push_back(indent + "  " + name + " = " + no + ";");
      lines->push_back(indent + "}");
    } else {
      lines->push_back(indent + "const " + type + " " + name + " = " + emitter.emit(n) + ";");
    }
    for (const ir::ExprNode* node : nodes_of[id]) bound[node] = name;  // printed as it
  }
  return emitter.emit(e);
}

}  // namespace

std::string cuda_expr_shared(const Expr& e, Names& names, std::vector<std::string>* decls) {
  return bind_in_scope(e, names, {}, "", decls);
}

std::string cuda_expr_prelude() {
  // Integer floor division and modulo as ir::floordiv_int / floormod_int (C's / and % truncate),
  // and NaN-propagating float min/max whose ties keep the first operand, as ir::evaluate.
  return R"(#define TESSERA_DEVICE __device__ __forceinline__
TESSERA_DEVICE long long tessera_floordiv(long long a, long long b) {
  long long q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
TESSERA_DEVICE int tessera_floordiv(int a, int b) {
  int q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
TESSERA_DEVICE long long tessera_floormod(long long a, long long b) {
  return b == -1 ? 0 : a - tessera_floordiv(a, b) * b;
}
TESSERA_DEVICE int tessera_floormod(int a, int b) {
  return b == -1 ? 0 : a - tessera_floordiv(a, b) * b;
}
TESSERA_DEVICE float tessera_fmax(float a, float b) { return (a != a || a >= b) ? a : b; }
TESSERA_DEVICE double tessera_fmax(double a, double b) { return (a != a || a >= b) ? a : b; }
TESSERA_DEVICE float tessera_fmin(float a, float b) { return (a != a || a <= b) ? a : b; }
TESSERA_DEVICE double tessera_fmin(double a, double b) { return (a != a || a <= b) ? a : b; }
)";
}

}  // namespace tessera::codegen::cuda
