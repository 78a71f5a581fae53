#include "frontend/expr_to_te.h"

#include <algorithm>
#include <set>

#include "frontend/expr_analysis.h"
#include "frontend/expr_error.h"
#include "frontend/expr_parser.h"

namespace tessera::frontend {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::Var;

namespace {

bool is_int_const(const Expr& e) { return e->kind == ir::ExprKind::kIntImm; }
bool is_float_const(const Expr& e) { return e->kind == ir::ExprKind::kFloatImm; }

class Lowering {
 public:
  Lowering(const Program& p, const ProgramShapes& shapes) : p_(p), shapes_(shapes) {
    for (const auto& [name, nd] : p.ndim) used_names_.insert(name);
    for (const Statement& s : p.statements) used_names_.insert(s.target);
  }

  void add_input(const std::string& name, DType dtype) {
    tensors_[name] = ir::placeholder(name, shapes_.shapes.at(name), dtype);
  }

  TeProgram run() {
    TeProgram out;
    for (const std::string& name : p_.inputs) out.inputs.push_back(tensors_.at(name));
    for (size_t si = 0; si < p_.statements.size(); ++si) statement(static_cast<int>(si));
    out.output = tensors_.at(p_.output_name());
    out.tensors = tensors_;
    return out;
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    throw ExpressionError(p_.source, offset, msg);
  }

  void statement(int si) {
    const Statement& s = p_.statements[si];
    statement_ = si;
    extents_ = &shapes_.extents[si];
    std::vector<Expr> shape = shapes_.shapes.at(s.target);
    const AstNode& rhs = *s.rhs;
    Tensor t;
    if (rhs.kind == AstKind::kReduce) {
      t = make_reduce(s.target, s.indices, rhs);
    } else {
      t = ir::compute(s.target, shape, [&](const std::vector<Var>& vars) {
        bind(s.indices, vars);
        Expr body = convert(rhs);
        env_.clear();
        return body;
      });
    }
    tensors_[s.target] = t;
  }

  void bind(const std::vector<std::string>& names, const std::vector<Var>& vars) {
    for (size_t i = 0; i < names.size(); ++i) env_.push_back({names[i], vars[i]});
  }

  Expr lookup(const AstNode& n) const {
    for (auto it = env_.rbegin(); it != env_.rend(); ++it) {
      if (it->first == n.name) return it->second;
    }
    fail(n.offset, "internal: iterator " + n.name + " is not bound");
  }

  std::vector<Expr> extents_of(const std::vector<std::string>& names) const {
    std::vector<Expr> out;
    for (const std::string& n : names) out.push_back(extents_->at(n));
    return out;
  }

  // A reduce op over `axes` (already-bound iterators of the enclosing scope, or the statement's
  // indices) reducing `node`'s body over its iterators.
  Tensor make_reduce(const std::string& name, const std::vector<std::string>& axes,
                     const AstNode& node) {
    auto saved = env_;
    Tensor t = ir::reduce(
        name, extents_of(axes), extents_of(node.reduce_iters), node.reduce,
        [&](const std::vector<Var>& vars, const std::vector<Var>& rvars) {
          env_.clear();
          bind(axes, vars);
          bind(node.reduce_iters, rvars);
          Expr body = convert(*node.args[0]);
          if (body->dtype == DType::kBool) {
            fail(node.offset, std::string("cannot ") + ir::reduce_kind_name(node.reduce) +
                                  " a comparison; turn it into numbers with where(cond, 1.0, 0.0)");
          }
          return body;
        });
    env_ = saved;
    return t;
  }

  // A reduction inside a larger expression: its own op over the free iterators it uses, in the
  // order they are bound (output indices first, then enclosing reductions', outer first).
  Expr nested_reduce(const AstNode& n) {
    std::vector<std::string> mentioned = mentioned_iterators(n);
    std::vector<std::string> free;
    std::vector<Expr> at;
    for (const auto& [name, v] : env_) {
      bool own =
          std::find(n.reduce_iters.begin(), n.reduce_iters.end(), name) != n.reduce_iters.end();
      if (!own && std::find(mentioned.begin(), mentioned.end(), name) != mentioned.end() &&
          std::find(free.begin(), free.end(), name) == free.end()) {
        free.push_back(name);
        at.push_back(v);
      }
    }
    std::string base = p_.statements[statement_].target + "_" + ir::reduce_kind_name(n.reduce);
    std::string name = base;
    for (int i = 1; used_names_.count(name); ++i) name = base + std::to_string(i);
    used_names_.insert(name);
    Tensor t = make_reduce(name, free, n);
    return ir::access(t, at);
  }

  // ---- types -------------------------------------------------------------------------------
  void no_bool(const Expr& e, size_t offset, const char* what) const {
    if (e->dtype == DType::kBool) {
      fail(offset, std::string("a comparison cannot be used ") + what +
                       "; choose values with where(cond, a, b)");
    }
  }

  // Brings two operands to one type (see the header for the rules).
  void promote(Expr& a, Expr& b, size_t offset) const {
    no_bool(a, offset, "in arithmetic");
    no_bool(b, offset, "in arithmetic");
    if (a->dtype == b->dtype) return;
    bool fa = ir::is_float(a->dtype), fb = ir::is_float(b->dtype);
    auto convert_to = [](Expr& e, DType t) {
      if (is_int_const(e)) {
        e = ir::make_const(t, static_cast<double>(e->int_value));
      } else if (is_float_const(e) && ir::is_float(t)) {
        e = ir::float_imm(e->float_value, t);
      } else {
        e = ir::cast(t, e);
      }
    };
    if (fa != fb) {
      if (fa) {
        convert_to(b, a->dtype);
      } else {
        convert_to(a, b->dtype);
      }
      return;
    }
    // Same kind, different widths: a literal adopts the other side's type, otherwise widen.
    bool ca = is_int_const(a) || is_float_const(a), cb = is_int_const(b) || is_float_const(b);
    if (ca && !cb) return convert_to(a, b->dtype);
    if (cb && !ca) return convert_to(b, a->dtype);
    DType wide = ir::dtype_bytes(a->dtype) >= ir::dtype_bytes(b->dtype) ? a->dtype : b->dtype;
    convert_to(a, wide);
    convert_to(b, wide);
  }

  Expr to_float(Expr e, size_t offset) const {
    no_bool(e, offset, "as a number");
    if (ir::is_float(e->dtype)) return e;
    if (is_int_const(e)) return ir::float_imm(static_cast<double>(e->int_value));
    return ir::cast(DType::kFloat32, e);
  }

  // ---- nodes -------------------------------------------------------------------------------
  Expr convert(const AstNode& n) {
    try {
      return convert_node(n);
    } catch (const ExpressionError&) {
      throw;
    } catch (const Error& e) {
      // A check in the IR builders: report it at this node rather than as a C++ location.
      fail(n.offset, strip_check_prefix(e.what()));
    }
  }

  Expr convert_node(const AstNode& n) {
    switch (n.kind) {
      case AstKind::kNumber:
        return n.is_integer ? ir::int_imm(n.int_value) : ir::float_imm(n.float_value);
      case AstKind::kIter:
        return lookup(n);
      case AstKind::kAccess: {
        std::vector<Expr> idx;
        for (const AstPtr& a : n.args) idx.push_back(convert(*a));
        return ir::access(tensors_.at(n.name), idx);
      }
      case AstKind::kReduce:
        return nested_reduce(n);
      case AstKind::kUnary: {
        Expr x = convert(*n.args[0]);
        if (n.op == AstOp::kNot) {
          if (x->dtype != DType::kBool) fail(n.offset, "'not' needs a comparison");
          return ir::logical_not(x);
        }
        no_bool(x, n.offset, "in arithmetic");
        return ir::neg(x);
      }
      case AstKind::kBinary:
        return binary(n);
      case AstKind::kCall:
        return call(n);
    }
    fail(n.offset, "internal: unknown node");
  }

  Expr binary(const AstNode& n) {
    Expr a = convert(*n.args[0]), b = convert(*n.args[1]);
    if (n.op == AstOp::kAnd || n.op == AstOp::kOr) {
      if (a->dtype != DType::kBool || b->dtype != DType::kBool) {
        fail(n.offset,
             std::string("'") + ast_op_symbol(n.op) + "' needs comparisons on both sides");
      }
      return n.op == AstOp::kAnd ? ir::logical_and(a, b) : ir::logical_or(a, b);
    }
    if (n.op == AstOp::kDiv && !ir::is_float(a->dtype) && !ir::is_float(b->dtype)) {
      a = to_float(a, n.offset);  // torch: int / int is a float division
      b = to_float(b, n.offset);
    }
    promote(a, b, n.offset);
    bool fl = ir::is_float(a->dtype);
    if ((n.op == AstOp::kFloorDiv || n.op == AstOp::kMod) && !fl && b->is_const_int(0)) {
      fail(n.offset, "division by zero");
    }
    switch (n.op) {
      case AstOp::kAdd:
        return a + b;
      case AstOp::kSub:
        return a - b;
      case AstOp::kMul:
        return a * b;
      case AstOp::kDiv:
        return ir::div(a, b);
      case AstOp::kFloorDiv:
        return fl ? ir::call(ir::CallOp::kFloor, {ir::div(a, b)}) : ir::floordiv(a, b);
      case AstOp::kMod:
        return fl ? a - ir::call(ir::CallOp::kFloor, {ir::div(a, b)}) * b : ir::floormod(a, b);
      case AstOp::kLT:
        return ir::lt(a, b);
      case AstOp::kLE:
        return ir::le(a, b);
      case AstOp::kGT:
        return ir::gt(a, b);
      case AstOp::kGE:
        return ir::ge(a, b);
      case AstOp::kEQ:
        return ir::eq(a, b);
      case AstOp::kNE:
        return ir::ne(a, b);
      default:
        break;
    }
    fail(n.offset, "internal: unknown operator");
  }

  Expr call(const AstNode& n) {
    std::vector<Expr> args;
    for (const AstPtr& a : n.args) args.push_back(convert(*a));
    const std::string& f = n.name;
    if (f == "where") {
      if (args[0]->dtype != DType::kBool) {
        fail(n.args[0]->offset, "the condition of where(...) must be a comparison");
      }
      promote(args[1], args[2], n.offset);
      return ir::select(args[0], args[1], args[2]);
    }
    if (f == "max" || f == "min") {
      promote(args[0], args[1], n.offset);
      return f == "max" ? ir::max(args[0], args[1]) : ir::min(args[0], args[1]);
    }
    if (f == "pow") {
      Expr a = to_float(args[0], n.offset), b = to_float(args[1], n.offset);
      promote(a, b, n.offset);
      return ir::call(ir::CallOp::kPow, {a, b});
    }
    Expr x = args[0];
    no_bool(x, n.offset, "as a number");
    bool fl = ir::is_float(x->dtype);
    if (f == "relu") return ir::relu(x);
    if (f == "abs") {
      return fl ? ir::call(ir::CallOp::kAbs, {x})
                : ir::select(ir::lt(x, ir::make_const(x->dtype, 0)), ir::neg(x), x);
    }
    if (f == "floor" || f == "ceil") {
      if (!fl) return x;
      return ir::call(f == "floor" ? ir::CallOp::kFloor : ir::CallOp::kCeil, {x});
    }
    x = to_float(x, n.offset);
    if (f == "exp") return ir::exp(x);
    if (f == "log") return ir::log(x);
    if (f == "sqrt") return ir::sqrt(x);
    if (f == "rsqrt") return ir::call(ir::CallOp::kRsqrt, {x});
    if (f == "tanh") return ir::tanh(x);
    if (f == "erf") return ir::erf(x);
    if (f == "sigmoid") return ir::sigmoid(x);
    if (f == "gelu") return ir::gelu(x);
    fail(n.offset, "internal: unknown function " + f);
  }

  const Program& p_;
  const ProgramShapes& shapes_;
  int statement_ = 0;
  const std::map<std::string, Expr>* extents_ = nullptr;
  std::vector<std::pair<std::string, Var>> env_;  // bound iterators, innermost last
  std::map<std::string, Tensor> tensors_;
  std::set<std::string> used_names_;
};

}  // namespace

TeProgram expression_to_te(const Program& p, const std::map<std::string, InputSpec>& inputs,
                           const ExtentHints& hints) {
  std::map<std::string, std::vector<Expr>> shapes;
  for (const auto& [name, spec] : inputs) shapes[name] = spec.shape;
  ProgramShapes ps = infer_shapes(p, shapes, hints);
  Lowering lowering(p, ps);
  for (const std::string& name : p.inputs) lowering.add_input(name, inputs.at(name).dtype);
  return lowering.run();
}

TeProgram expression_to_te(const std::string& source,
                           const std::map<std::string, std::vector<int64_t>>& shapes,
                           const std::map<std::string, DType>& dtypes, const ExtentHints& hints) {
  Program p = parse_expression(source);
  std::map<std::string, InputSpec> inputs;
  for (const auto& [name, dims] : shapes) {
    InputSpec spec;
    for (int64_t d : dims) spec.shape.push_back(ir::int_imm(d));
    auto dt = dtypes.find(name);
    if (dt != dtypes.end()) spec.dtype = dt->second;
    inputs[name] = spec;
  }
  return expression_to_te(p, inputs, hints);
}

std::vector<int64_t> expression_output_shape(
    const Program& p, const std::map<std::string, std::vector<int64_t>>& shapes,
    const ExtentHints& hints) {
  std::map<std::string, std::vector<Expr>> dims;
  for (const auto& [name, s] : shapes) {
    std::vector<Expr>& d = dims[name];  // created even for a 0-d input
    for (int64_t v : s) d.push_back(ir::int_imm(v));
  }
  ProgramShapes ps = infer_shapes(p, dims, hints);
  std::vector<int64_t> out;
  for (const Expr& e : ps.shapes.at(p.output_name())) out.push_back(e->int_value);
  return out;
}

}  // namespace tessera::frontend
