#include "frontend/expr_ast.h"

#include <cmath>
#include <sstream>
#include <utility>

namespace tessera::frontend {

namespace {

// Name and arity of every elementwise function (order = order in messages).
const std::vector<std::pair<const char*, int>>& function_table() {
  static const std::vector<std::pair<const char*, int>> table = {
      {"exp", 1},     {"log", 1}, {"sqrt", 1}, {"rsqrt", 1}, {"tanh", 1},  {"erf", 1},
      {"sigmoid", 1}, {"abs", 1}, {"relu", 1}, {"gelu", 1},  {"floor", 1}, {"ceil", 1},
      {"max", 2},     {"min", 2}, {"pow", 2},  {"where", 3},
  };
  return table;
}

}  // namespace

int function_arity(const std::string& name) {
  for (const auto& [n, arity] : function_table()) {
    if (name == n) return arity;
  }
  return 0;
}

std::string function_names() {
  std::string out;
  for (const auto& entry : function_table()) {
    if (!out.empty()) out += ", ";
    out += entry.first;
  }
  return out;
}

const char* ast_op_symbol(AstOp op) {
  switch (op) {
    case AstOp::kAdd:
      return "+";
    case AstOp::kSub:
      return "-";
    case AstOp::kMul:
      return "*";
    case AstOp::kDiv:
      return "/";
    case AstOp::kFloorDiv:
      return "//";
    case AstOp::kMod:
      return "%";
    case AstOp::kLT:
      return "<";
    case AstOp::kLE:
      return "<=";
    case AstOp::kGT:
      return ">";
    case AstOp::kGE:
      return ">=";
    case AstOp::kEQ:
      return "==";
    case AstOp::kNE:
      return "!=";
    case AstOp::kAnd:
      return "and";
    case AstOp::kOr:
      return "or";
    case AstOp::kNeg:
      return "neg";
    case AstOp::kNot:
      return "not";
  }
  return "?";
}

bool is_comparison(AstOp op) { return op >= AstOp::kLT && op <= AstOp::kNE; }

std::string ast_to_string(const AstNode& n) {
  std::ostringstream os;
  auto join_args = [&](const char* sep) {
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) os << sep;
      os << ast_to_string(*n.args[i]);
    }
  };
  switch (n.kind) {
    case AstKind::kNumber:
      if (n.is_integer) {
        os << n.int_value;
      } else {
        os << n.float_value;
        // Keep integral floats recognisable as floats: "2.0", not "2".
        if (std::fabs(n.float_value) < 1e15 && std::floor(n.float_value) == n.float_value) {
          os << ".0";
        }
      }
      break;
    case AstKind::kIter:
      os << n.name;
      break;
    case AstKind::kAccess:
      os << n.name << "[";
      join_args(", ");
      os << "]";
      break;
    case AstKind::kCall:
      os << n.name << "(";
      join_args(", ");
      os << ")";
      break;
    case AstKind::kUnary:
    case AstKind::kBinary:
      os << "(" << ast_op_symbol(n.op) << " ";
      join_args(" ");
      os << ")";
      break;
    case AstKind::kReduce:
      os << "(" << ir::reduce_kind_name(n.reduce) << " [";
      for (size_t i = 0; i < n.reduce_iters.size(); ++i) os << (i ? ", " : "") << n.reduce_iters[i];
      os << "] " << ast_to_string(*n.args[0]) << ")";
      break;
  }
  return os.str();
}

std::string statement_to_string(const Statement& s) {
  std::string out = s.target + "[";
  for (size_t i = 0; i < s.indices.size(); ++i) out += (i ? ", " : "") + s.indices[i];
  return out + "] = " + ast_to_string(*s.rhs);
}

}  // namespace tessera::frontend
