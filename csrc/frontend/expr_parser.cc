#include "frontend/expr_parser.h"

#include <algorithm>

#include "frontend/expr_analysis.h"
#include "frontend/expr_error.h"
#include "frontend/expr_lexer.h"

namespace tessera::frontend {

namespace {

AstPtr make_node(AstKind kind, size_t offset) {
  auto n = std::make_unique<AstNode>();
  n->kind = kind;
  n->offset = offset;
  return n;
}

const char* kTooDeep =
    "expression nests deeper than 256 levels (parentheses, signs, calls, reductions and chained "
    "operators count); split it into several statements";
static_assert(kMaxExpressionDepth == 256, "kTooDeep names the limit");

AstPtr make_binary(AstOp op, size_t offset, AstPtr lhs, AstPtr rhs) {
  AstPtr n = make_node(AstKind::kBinary, offset);
  n->op = op;
  n->args.push_back(std::move(lhs));
  n->args.push_back(std::move(rhs));
  return n;
}

ir::ReduceKind reducer_of(const std::string& name) {
  if (name == "sum") return ir::ReduceKind::kSum;
  if (name == "max") return ir::ReduceKind::kMax;
  if (name == "min") return ir::ReduceKind::kMin;
  return ir::ReduceKind::kNone;
}

// Tokens that may begin an operand (used to tell a reduction's body from a following operator).
bool starts_operand(TokenKind k) {
  return k == TokenKind::kIdent || k == TokenKind::kInt || k == TokenKind::kFloat ||
         k == TokenKind::kLParen || k == TokenKind::kMinus || k == TokenKind::kPlus;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::kIdent:
      return "'" + t.text + "'";
    case TokenKind::kInt:
    case TokenKind::kFloat:
      return "number " + t.text;
    case TokenKind::kSeparator:
      return t.text == ";" ? "';'" : "end of line";
    default:
      return token_kind_name(t.kind);
  }
}

class Parser {
 public:
  explicit Parser(const std::string& source) : src_(source), toks_(lex_expression(source)) {}

  // Every recursive cycle of the grammar passes through unary() or not_expr(); each holds one of
  // these, so the parser's own recursion is bounded like the trees it builds.
  class Nesting {
   public:
    explicit Nesting(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxExpressionDepth) p_.fail(p_.peek(), kTooDeep);
    }
    ~Nesting() { --p_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };

  std::vector<Statement> run() {
    std::vector<Statement> out;
    skip_separators();
    while (peek().kind != TokenKind::kEnd) {
      out.push_back(statement());
      if (peek().kind != TokenKind::kEnd && peek().kind != TokenKind::kSeparator) {
        fail(peek(), "expected ';' or a new line after the statement, got " + describe(peek()));
      }
      skip_separators();
    }
    if (out.empty()) {
      throw ExpressionError(src_, 0,
                            "empty expression; write e.g. C[i, j] = sum(k) A[i, k] * B[k, j]");
    }
    return out;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(TokenKind k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const Token& at, const std::string& message) const {
    throw ExpressionError(src_, at.offset, message);
  }
  const Token& expect(TokenKind k, const std::string& context) {
    if (peek().kind != k) {
      fail(peek(), std::string("expected ") + token_kind_name(k) + " " + context + ", got " +
                       describe(peek()));
    }
    return next();
  }
  void skip_separators() {
    while (peek().kind == TokenKind::kSeparator) next();
  }

  // Sets the height of a node built from its children, refusing trees taller than the limit.
  AstPtr sized(AstPtr n) const {
    for (const AstPtr& a : n->args) n->depth = std::max(n->depth, a->depth + 1);
    if (n->depth > kMaxExpressionDepth) fail_at(n->offset, kTooDeep);
    return n;
  }

  Statement statement() {
    Statement s;
    if (peek().kind != TokenKind::kIdent) {
      fail(peek(), "expected the name of the tensor being defined (as in C[i, j] = ...), got " +
                       describe(peek()));
    }
    const Token& name = next();
    s.target = name.text;
    s.target_offset = name.offset;
    if (peek().kind != TokenKind::kLBracket) {
      fail(peek(), "expected '[' after " + s.target +
                       ": the defined tensor is written with its "
                       "indices, as in " +
                       s.target + "[i, j] = ... (" + s.target + "[] for a scalar)");
    }
    next();
    if (peek().kind != TokenKind::kRBracket) {
      while (true) {
        if (peek().kind != TokenKind::kIdent) {
          fail(peek(),
               "the indices of the defined tensor must be iterator names (index "
               "arithmetic belongs on the right-hand side), got " +
                   describe(peek()));
        }
        const Token& idx = next();
        s.indices.push_back(idx.text);
        s.index_offsets.push_back(idx.offset);
        if (accept(TokenKind::kComma)) continue;
        if (peek().kind != TokenKind::kRBracket) {
          TokenKind k = peek().kind;
          bool arithmetic = k == TokenKind::kPlus || k == TokenKind::kMinus ||
                            k == TokenKind::kStar || k == TokenKind::kSlash ||
                            k == TokenKind::kSlashSlash || k == TokenKind::kPercent ||
                            k == TokenKind::kLParen || k == TokenKind::kLBracket;
          if (arithmetic) {
            fail(peek(),
                 "the indices of the defined tensor must be iterator names (index "
                 "arithmetic belongs on the right-hand side)");
          }
          fail(peek(),
               "expected ',' or ']' in the indices of " + s.target + ", got " + describe(peek()));
        }
        break;
      }
    }
    next();  // ']'
    expect(TokenKind::kAssign, "after " + s.target + "[...]");
    s.rhs = expression();
    return s;
  }

  AstPtr expression() {
    AstPtr lhs = and_expr();
    while (peek().kind == TokenKind::kOr) {
      size_t at = next().offset;
      lhs = sized(make_binary(AstOp::kOr, at, std::move(lhs), and_expr()));
    }
    return lhs;
  }

  AstPtr and_expr() {
    AstPtr lhs = not_expr();
    while (peek().kind == TokenKind::kAnd) {
      size_t at = next().offset;
      lhs = sized(make_binary(AstOp::kAnd, at, std::move(lhs), not_expr()));
    }
    return lhs;
  }

  AstPtr not_expr() {
    if (peek().kind == TokenKind::kNot) {
      Nesting nest(*this);
      AstPtr n = make_node(AstKind::kUnary, next().offset);
      n->op = AstOp::kNot;
      n->args.push_back(not_expr());
      return sized(std::move(n));
    }
    return comparison();
  }

  static bool comparison_op(TokenKind k, AstOp* op) {
    switch (k) {
      case TokenKind::kLT:
        *op = AstOp::kLT;
        return true;
      case TokenKind::kLE:
        *op = AstOp::kLE;
        return true;
      case TokenKind::kGT:
        *op = AstOp::kGT;
        return true;
      case TokenKind::kGE:
        *op = AstOp::kGE;
        return true;
      case TokenKind::kEQ:
        *op = AstOp::kEQ;
        return true;
      case TokenKind::kNE:
        *op = AstOp::kNE;
        return true;
      default:
        return false;
    }
  }

  AstPtr comparison() {
    AstPtr lhs = additive();
    AstOp op;
    if (!comparison_op(peek().kind, &op)) return lhs;
    size_t at = next().offset;
    AstPtr n = sized(make_binary(op, at, std::move(lhs), additive()));
    if (comparison_op(peek().kind, &op)) {
      fail(peek(), "comparisons cannot be chained; combine them with 'and'");
    }
    return n;
  }

  AstPtr additive() {
    AstPtr lhs = term();
    while (peek().kind == TokenKind::kPlus || peek().kind == TokenKind::kMinus) {
      const Token& t = next();
      AstOp op = t.kind == TokenKind::kPlus ? AstOp::kAdd : AstOp::kSub;
      lhs = sized(make_binary(op, t.offset, std::move(lhs), term()));
    }
    return lhs;
  }

  AstPtr term() {
    AstPtr lhs = unary();
    while (true) {
      AstOp op;
      switch (peek().kind) {
        case TokenKind::kStar:
          op = AstOp::kMul;
          break;
        case TokenKind::kSlash:
          op = AstOp::kDiv;
          break;
        case TokenKind::kSlashSlash:
          op = AstOp::kFloorDiv;
          break;
        case TokenKind::kPercent:
          op = AstOp::kMod;
          break;
        default:
          return lhs;
      }
      size_t at = next().offset;
      lhs = sized(make_binary(op, at, std::move(lhs), unary()));
    }
  }

  AstPtr unary() {
    Nesting nest(*this);
    if (peek().kind == TokenKind::kMinus) {
      AstPtr n = make_node(AstKind::kUnary, next().offset);
      n->op = AstOp::kNeg;
      n->args.push_back(unary());
      return sized(std::move(n));
    }
    if (accept(TokenKind::kPlus)) return unary();
    return primary();
  }

  AstPtr primary() {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kInt:
      case TokenKind::kFloat: {
        next();
        AstPtr n = make_node(AstKind::kNumber, t.offset);
        n->is_integer = t.kind == TokenKind::kInt;
        n->int_value = t.int_value;
        n->float_value = t.float_value;
        return n;
      }
      case TokenKind::kLParen: {
        next();
        AstPtr inner = expression();
        expect(TokenKind::kRParen, "to close the '('");
        return inner;
      }
      case TokenKind::kIdent:
        break;
      case TokenKind::kNot:
        fail(t, "'not' applies to a whole comparison; put it in parentheses: (not a < b)");
      default:
        fail(t,
             "expected an operand (a tensor access, an iterator, a number, a function or a "
             "reduction), got " +
                 describe(t));
    }
    const Token& name = next();
    if (peek().kind == TokenKind::kLBracket) {
      next();
      AstPtr n = make_node(AstKind::kAccess, name.offset);
      n->name = name.text;
      n->args = argument_list(TokenKind::kRBracket, "in the indices of " + name.text);
      return sized(std::move(n));
    }
    if (peek().kind == TokenKind::kLParen) return call_or_reduction(name);
    AstPtr n = make_node(AstKind::kIter, name.offset);
    n->name = name.text;
    return n;
  }

  // Comma-separated expressions up to `close` (the opener is consumed already).
  std::vector<AstPtr> argument_list(TokenKind close, const std::string& context) {
    std::vector<AstPtr> args;
    if (accept(close)) return args;
    while (true) {
      args.push_back(expression());
      if (accept(TokenKind::kComma)) continue;
      if (peek().kind != close) {
        fail(peek(), std::string("expected ',' or ") + token_kind_name(close) + " " + context +
                         ", got " + describe(peek()));
      }
      next();
      return args;
    }
  }

  AstPtr call_or_reduction(const Token& name) {
    const Token& open = next();  // '('
    std::vector<AstPtr> args = argument_list(TokenKind::kRParen, "in the call of " + name.text);
    ir::ReduceKind reducer = reducer_of(name.text);
    bool is_reduction = false;
    if (reducer == ir::ReduceKind::kSum) {
      is_reduction = true;
    } else if (reducer != ir::ReduceKind::kNone) {
      TokenKind k = peek().kind;
      bool sign = k == TokenKind::kMinus || k == TokenKind::kPlus;
      is_reduction = starts_operand(k) && !(sign && args.size() == 2);
    }
    if (is_reduction) return reduction(name, reducer, std::move(args));

    int arity = function_arity(name.text);
    if (arity == 0) {
      fail(name, "unknown function '" + name.text + "'; the functions are " + function_names() +
                     ", and the reductions sum, max, min");
    }
    if (static_cast<int>(args.size()) != arity) {
      const Token& at = args.empty() ? open : name;
      std::string msg = name.text + " takes " + std::to_string(arity) + " argument" +
                        (arity == 1 ? "" : "s") + ", got " + std::to_string(args.size());
      if (reducer != ir::ReduceKind::kNone) {
        msg += " (to reduce, follow the iterators with the body: " + name.text + "(j) X[i, j])";
      }
      fail(at, msg);
    }
    AstPtr n = make_node(AstKind::kCall, name.offset);
    n->name = name.text;
    n->args = std::move(args);
    return sized(std::move(n));
  }

  AstPtr reduction(const Token& keyword, ir::ReduceKind kind, std::vector<AstPtr> iters) {
    if (iters.empty()) {
      fail(keyword, keyword.text + "() needs the iterators to reduce over, as in " + keyword.text +
                        "(k) A[i, k]");
    }
    AstPtr n = make_node(AstKind::kReduce, keyword.offset);
    n->reduce = kind;
    for (const AstPtr& it : iters) {
      if (it->kind != AstKind::kIter) {
        fail_at(it->offset, "the parentheses of " + keyword.text +
                                "(...) list the iterators to reduce over (plain names); the "
                                "reduced expression follows them, as in " +
                                keyword.text + "(k) A[i, k]");
      }
      for (const std::string& prev : n->reduce_iters) {
        if (prev == it->name) fail_at(it->offset, "iterator " + it->name + " is listed twice");
      }
      n->reduce_iters.push_back(it->name);
      n->reduce_iter_offsets.push_back(it->offset);
    }
    if (!starts_operand(peek().kind)) {
      fail(peek(), keyword.text + "(" + n->reduce_iters[0] +
                       (n->reduce_iters.size() > 1 ? ", ..." : "") +
                       ") needs the expression to reduce after it, got " + describe(peek()));
    }
    n->args.push_back(term());
    return sized(std::move(n));
  }

  [[noreturn]] void fail_at(size_t offset, const std::string& message) const {
    throw ExpressionError(src_, offset, message);
  }

  const std::string& src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int nesting_ = 0;  // unary() and not_expr() frames open
};

}  // namespace

std::vector<Statement> parse_statements(const std::string& source) { return Parser(source).run(); }

Program parse_expression(const std::string& source) {
  Program p;
  p.source = source;
  p.statements = parse_statements(source);
  analyze_program(&p);
  return p;
}

}  // namespace tessera::frontend
