// Recursive-descent parser of the canonical text (grammar: the printer in canonical_text.cc).
//
//   text     := "tessera-workload-v1\n" sizes buffer* tensor* outputs inputs hint*
//   sizes    := "sizes:" (" n<k>=" dtype "[" bound "," bound "]")* "\n"
//   buffer   := "b<k> = buffer " dtype "[" exprs "] " scope "\n"
//   tensor   := "t<k> = placeholder " type " pad=" float "\n"
//             | "t<k> = compute " type " pad=" float " axes(" iters ")" [" " reduce "(" iters ")"]
//               " := " expr "\n"
//   expr     := int [":" dtype] | float ":" dtype | a<k> | r<k> | n<k> | %<k>
//             | "(let" (" %<k>=" expr)+ " in " expr ")" | "(" head (" " expr)* ")"
//
// Every node is built as printed (no folding), so printing the parsed DAG gives the same text.
#include "db/canonical_parse.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>

#include "ir/buffer.h"
#include "util/check.h"

namespace tessera::db {

namespace {

using ir::DType;
using ir::Expr;
using ir::ExprKind;
using ir::ExprNode;

constexpr const char* kHeader = "tessera-workload-v1\n";

// Upper ends (inclusive) of the enums the text names, for reverse lookup by name.
constexpr int kLastDType = static_cast<int>(DType::kFloat64);
constexpr int kLastExprKind = static_cast<int>(ExprKind::kLoad);
constexpr int kLastCallOp = static_cast<int>(ir::CallOp::kPow);
constexpr int kLastReduceKind = static_cast<int>(ir::ReduceKind::kMin);
constexpr int kLastMemScope = static_cast<int>(ir::MemScope::kShared);

// Characters a tag hint may use (tags are identifiers; anything else is not sent).
bool is_tag_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Characters of a leaf token: names, decimal and hexadecimal numbers, inf and nan.
bool is_token_char(char c) { return is_tag_char(c) || c == '+' || c == '%'; }

bool is_digits(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// The compute op of a tensor under construction (hints still edit it).
struct PendingTensor {
  std::shared_ptr<ir::TensorNode> tensor;
  std::shared_ptr<ir::ComputeOpNode> op;  // null for placeholders
};

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  ParsedDag run() {
    expect(kHeader);
    parse_sizes();
    while (peek_id_line('b')) parse_buffer();
    while (peek_id_line('t')) parse_tensor();
    ParsedDag dag;
    expect("outputs:");
    dag.outputs = tensor_list();
    expect("inputs:");
    dag.inputs = tensor_list();
    dag.canonical = text_.substr(0, pos_);
    while (pos_ < text_.size()) parse_hint();
    for (const PendingTensor& p : tensors_) dag.tensors.push_back(p.tensor);
    return dag;
  }

 private:
  // ---- characters ------------------------------------------------------------------------------
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string found = pos_ < text_.size() ? text_.substr(pos_, 16) : "end of text";
    for (char& c : found) {
      if (c == '\n') c = '|';
    }
    throw Error("canonical text, line " + std::to_string(line) + " column " + std::to_string(col) +
                ": " + what + " (at '" + found + "')");
  }

  bool at(const char* s) const {
    return text_.compare(pos_, std::char_traits<char>::length(s), s) == 0;
  }
  bool at_char(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void expect(const char* s) {
    if (!at(s)) fail(std::string("expected '") + s + "'");
    pos_ += std::char_traits<char>::length(s);
  }

  bool accept(const char* s) {
    if (!at(s)) return false;
    pos_ += std::char_traits<char>::length(s);
    return true;
  }

  // A maximal run of token characters (possibly empty).
  std::string token() {
    const size_t from = pos_;
    while (pos_ < text_.size() && is_token_char(text_[pos_])) ++pos_;
    return text_.substr(from, pos_ - from);
  }

  // "<letter><digits>" at the start of a line, followed by " = ".
  bool peek_id_line(char letter) const {
    if (!at_char(letter)) return false;
    size_t i = pos_ + 1;
    while (i < text_.size() && text_[i] >= '0' && text_[i] <= '9') ++i;
    return i > pos_ + 1 && text_.compare(i, 3, " = ") == 0;
  }

  // "<letter><k>" -> k, where k < count.
  int id(char letter, size_t count, const char* what) {
    const size_t from = pos_;
    const std::string tok = token();
    if (tok.size() < 2 || tok[0] != letter || !is_digits(tok, 1) || tok.size() > 10) {
      pos_ = from;
      fail(std::string("expected ") + what);
    }
    const long k = std::strtol(tok.c_str() + 1, nullptr, 10);
    if (static_cast<size_t>(k) >= count) {
      pos_ = from;
      fail(std::string("undefined ") + what + " " + tok);
    }
    return static_cast<int>(k);
  }

  // The id a definition line introduces: exactly the next one.
  void defining_id(char letter, size_t next, const char* what) {
    const size_t from = pos_;
    const std::string tok = token();
    if (tok != letter + std::to_string(next)) {
      pos_ = from;
      fail(std::string("expected ") + what + " " + letter + std::to_string(next));
    }
  }

  int64_t integer() {
    const size_t from = pos_;
    const std::string tok = token();
    const size_t digits_from = !tok.empty() && tok[0] == '-' ? 1 : 0;
    if (!is_digits(tok, digits_from)) {
      pos_ = from;
      fail("expected an integer");
    }
    errno = 0;
    const long long v = std::strtoll(tok.c_str(), nullptr, 10);
    if (errno == ERANGE) {
      pos_ = from;
      fail("integer out of range");
    }
    return static_cast<int64_t>(v);
  }

  // Exact text of a double as the printer writes it (%a, inf, nan).
  double real() {
    const size_t from = pos_;
    const std::string tok = token();
    char* end = nullptr;
    const double v = tok.empty() ? 0 : std::strtod(tok.c_str(), &end);
    if (tok.empty() || end != tok.c_str() + tok.size()) {
      pos_ = from;
      fail("expected a number");
    }
    return v;
  }

  int64_t bound() {
    if (accept("-inf")) return ir::kNoLowerBound;
    if (accept("inf")) return ir::kNoUpperBound;
    return integer();
  }

  template <typename Enum>
  Enum named(const char* (*name_of)(Enum), int last, const std::string& tok, const char* what) {
    for (int i = 0; i <= last; ++i) {
      if (tok == name_of(static_cast<Enum>(i))) return static_cast<Enum>(i);
    }
    fail(std::string("unknown ") + what + " '" + tok + "'");
  }

  DType dtype() {
    const size_t from = pos_;
    const std::string tok = token();
    for (int i = 0; i <= kLastDType; ++i) {
      if (tok == ir::dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
    }
    pos_ = from;
    fail("unknown dtype '" + tok + "'");
  }

  // ---- declarations ----------------------------------------------------------------------------
  void parse_sizes() {
    expect("sizes: ");
    if (accept("\n")) return;
    while (true) {
      defining_id('n', sizes_.size(), "size");
      expect("=");
      const DType t = dtype();
      expect("[");
      const int64_t lo = bound();
      expect(",");
      const int64_t hi = bound();
      expect("]");
      sizes_.push_back(ir::var("n" + std::to_string(sizes_.size()), lo, hi, t));
      if (accept("\n")) return;
      expect(" ");
    }
  }

  void parse_buffer() {
    defining_id('b', buffers_.size(), "buffer");
    expect(" = buffer ");
    const DType t = dtype();
    std::vector<Expr> shape = dims();
    expect(" ");
    const size_t from = pos_;
    const std::string scope_name = token();
    pos_ = from;
    const auto scope = named(ir::mem_scope_name, kLastMemScope, scope_name, "memory scope");
    pos_ += scope_name.size();
    expect("\n");
    buffers_.push_back(
        ir::make_buffer("b" + std::to_string(buffers_.size()), t, std::move(shape), scope));
  }

  // "[" expr ("," expr)* "]" or "[]".
  std::vector<Expr> dims() {
    expect("[");
    std::vector<Expr> out;
    if (accept("]")) return out;
    while (true) {
      out.push_back(root_expr());
      if (accept("]")) return out;
      expect(",");
    }
  }

  void parse_tensor() {
    const size_t k = tensors_.size();
    defining_id('t', k, "tensor");
    expect(" = ");
    const bool is_compute = accept("compute ");
    if (!is_compute) expect("placeholder ");
    PendingTensor p;
    p.tensor = std::make_shared<ir::TensorNode>();
    p.tensor->name = "t" + std::to_string(k);
    p.tensor->dtype = dtype();
    p.tensor->shape = dims();
    expect(" pad=");
    p.tensor->pad_value = real();
    if (is_compute) {
      p.op = parse_op(p.tensor->name);
      if (p.op->axes.size() != p.tensor->shape.size())
        fail("a compute needs one axis per dimension");
    }
    p.tensor->op = p.op;
    expect("\n");
    tensors_.push_back(std::move(p));
  }

  std::shared_ptr<ir::ComputeOpNode> parse_op(const std::string& name) {
    auto op = std::make_shared<ir::ComputeOpNode>();
    op->name = name;
    scope_.clear();
    expect(" axes(");
    op->axes = iter_vars('a');
    if (!accept(" := ")) {
      expect(" ");
      const size_t from = pos_;
      const std::string kind = token();
      pos_ = from;
      op->reduce = named(ir::reduce_kind_name, kLastReduceKind, kind, "reducer");
      pos_ += kind.size();
      expect("(");
      op->reduce_axes = iter_vars('r');
      expect(" := ");
    }
    op->tag = op->reduce == ir::ReduceKind::kNone ? "elementwise" : "reduce";  // as ir::compute
    op->body = root_expr();
    scope_.clear();
    return op;
  }

  // "<letter><k>:<dtype><extent>" separated by ", ", up to ")"; each joins the op's scope.
  std::vector<ir::IterVar> iter_vars(char letter) {
    std::vector<ir::IterVar> out;
    if (accept(")")) return out;
    while (true) {
      defining_id(letter, out.size(), "iterator");
      expect(":");
      const DType t = dtype();
      expect("<");
      Expr extent = root_expr();
      expect(">");
      const std::string name = letter + std::to_string(out.size());
      ir::IterVar iv = ir::make_iter_var(name, extent);  // bounds from the extent
      if (t != iv.var->dtype) iv.var = ir::var(name, iv.var->lo, iv.var->hi, t);
      scope_.push_back({letter, iv.var});
      out.push_back(std::move(iv));
      if (accept(")")) return out;
      expect(", ");
    }
  }

  std::vector<ir::Tensor> tensor_list() {
    std::vector<ir::Tensor> out;
    while (accept(" ")) {
      if (at_char('\n')) break;  // an empty list prints as "outputs: "
      out.push_back(tensors_[id('t', tensors_.size(), "tensor")].tensor);
    }
    expect("\n");
    return out;
  }

  // "hint t<k> tag=<tag> [reduce=<perm>]\n"
  void parse_hint() {
    expect("hint ");
    const int k = id('t', tensors_.size(), "tensor");
    const std::shared_ptr<ir::ComputeOpNode>& op = tensors_[k].op;
    if (!op) fail("a hint for a placeholder");
    expect(" tag=");
    const size_t from = pos_;
    while (pos_ < text_.size() && is_tag_char(text_[pos_])) ++pos_;
    if (pos_ == from) fail("expected a tag");
    op->tag = text_.substr(from, pos_ - from);
    if (accept(" reduce=")) reorder_reduce_axes(op.get());
    expect("\n");
  }

  // perm[i] = canonical position of the op's i-th summation iterator.
  void reorder_reduce_axes(ir::ComputeOpNode* op) {
    const size_t n = op->reduce_axes.size();
    std::vector<ir::IterVar> ordered;
    std::vector<bool> taken(n, false);
    while (true) {
      const int64_t k = integer();
      if (k < 0 || static_cast<size_t>(k) >= n || taken[k]) fail("not a permutation of r0..");
      taken[k] = true;
      ordered.push_back(op->reduce_axes[k]);
      if (!accept(",")) break;
    }
    if (ordered.size() != n) fail("not a permutation of r0..");
    op->reduce_axes = std::move(ordered);
  }

  // ---- expressions -----------------------------------------------------------------------------
  // One printed expression: its let numbering starts afresh.
  Expr root_expr() {
    std::vector<Expr> outer;
    outer.swap(lets_);
    Expr e = expr();
    lets_.swap(outer);
    return e;
  }

  Expr expr() {
    if (++depth_ > kMaxDepth) fail("expression nested too deeply");
    Expr e = at_char('(') ? compound() : leaf();
    --depth_;
    return e;
  }

  Expr leaf() {
    const size_t from = pos_;
    const std::string tok = token();
    if (tok.empty()) fail("expected an expression");
    if (tok[0] == '%') {
      pos_ = from + 1;
      return lets_[id_digits(lets_.size(), "let binding")];
    }
    if ((tok[0] == 'a' || tok[0] == 'r' || tok[0] == 'n') && is_digits(tok, 1)) {
      pos_ = from;
      return variable(tok[0]);
    }
    pos_ = from;
    const bool decimal = is_digits(tok, !tok.empty() && tok[0] == '-' ? 1 : 0);
    auto n = std::make_shared<ExprNode>();
    if (decimal) {
      n->kind = ExprKind::kIntImm;
      n->int_value = integer();
      n->dtype = accept(":") ? dtype() : ir::kIndexType;
    } else {
      n->kind = ExprKind::kFloatImm;
      n->float_value = real();
      expect(":");
      n->dtype = dtype();
    }
    return Expr(n);
  }

  // Digits after a consumed prefix, as an index below `count`.
  size_t id_digits(size_t count, const char* what) {
    const size_t from = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    const std::string digits = text_.substr(from, pos_ - from);
    if (digits.empty() || digits.size() > 9 || std::stoul(digits) >= count) {
      pos_ = from;
      fail(std::string("undefined ") + what);
    }
    return std::stoul(digits);
  }

  Expr variable(char letter) {
    if (letter == 'n') return sizes_[id('n', sizes_.size(), "size")];
    // a<k>/r<k>: the iterators of the op being parsed, declared so far.
    size_t count = 0;
    for (const auto& [l, v] : scope_) count += l == letter;
    const int k = id(letter, count, "iterator");
    int seen = 0;
    for (const auto& [l, v] : scope_) {
      if (l == letter && seen++ == k) return v;
    }
    fail("undefined iterator");
  }

  Expr compound() {
    expect("(");
    if (accept("let ")) return let_expr();
    const size_t head_at = pos_;
    const std::string head = token();
    auto n = std::make_shared<ExprNode>();
    if (head.empty()) fail("expected an operator");
    expect(":");
    n->dtype = dtype();
    if (head == "access") {
      n->kind = ExprKind::kAccess;
      expect(" ");
      n->tensor = tensors_[id('t', tensors_.size(), "tensor")].tensor;
    } else if (head == "load") {
      n->kind = ExprKind::kLoad;
      expect(" ");
      n->buffer = buffers_[id('b', buffers_.size(), "buffer")];
    } else {
      set_operator(head, head_at, n.get());
    }
    while (accept(" ")) n->operands.push_back(expr());
    expect(")");
    check_arity(*n, head_at);
    return Expr(n);
  }

  // A call op (lower case) or another expression kind (capitalised).
  void set_operator(const std::string& head, size_t head_at, ExprNode* n) {
    for (int i = 0; i <= kLastCallOp; ++i) {
      if (head == ir::call_op_name(static_cast<ir::CallOp>(i))) {
        n->kind = ExprKind::kCall;
        n->call_op = static_cast<ir::CallOp>(i);
        return;
      }
    }
    // Leaves print without parentheses; access and load have their own heads.
    for (int i = static_cast<int>(ExprKind::kAdd); i <= kLastExprKind; ++i) {
      const auto kind = static_cast<ExprKind>(i);
      if (kind == ExprKind::kCall || kind == ExprKind::kAccess || kind == ExprKind::kLoad) continue;
      if (head == ir::expr_kind_name(kind)) {
        n->kind = kind;
        return;
      }
    }
    pos_ = head_at;
    fail("unknown operator '" + head + "'");
  }

  void check_arity(const ExprNode& n, size_t head_at) {
    size_t want = 0;
    if (ir::is_binary(n.kind)) {
      want = 2;
    } else if (n.kind == ExprKind::kSelect) {
      want = 3;
    } else if (n.kind == ExprKind::kCall) {
      want = static_cast<size_t>(ir::call_op_arity(n.call_op));
    } else if (n.kind == ExprKind::kAccess) {
      want = n.tensor->shape.size();
    } else {
      want = 1;  // Not, Cast, Load
    }
    if (n.operands.size() != want) {
      pos_ = head_at;
      fail("expected " + std::to_string(want) + " operand(s), found " +
           std::to_string(n.operands.size()));
    }
  }

  // After "(let ": "%0=e0 %1=e1 ... in body)".
  Expr let_expr() {
    const size_t first = lets_.size();
    do {
      expect("%");
      const size_t from = pos_;
      if (id_digits(lets_.size() + 1, "let binding") != lets_.size()) {
        pos_ = from;
        fail("let bindings must be numbered in order");
      }
      expect("=");
      lets_.push_back(expr());
      expect(" ");
    } while (!accept("in "));
    Expr body = expr();
    expect(")");
    lets_.resize(first);
    return body;
  }

  // Deeper expressions than this are malformed (the printer's are far shallower): the limit keeps
  // the recursion off the end of the stack.
  static constexpr int kMaxDepth = 1000;

  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::vector<Expr> sizes_;
  std::vector<ir::Buffer> buffers_;
  std::vector<PendingTensor> tensors_;
  std::vector<std::pair<char, Expr>> scope_;  // iterators of the op being parsed
  std::vector<Expr> lets_;                    // bindings of the expression being parsed
};

}  // namespace

ParsedDag parse_canonical(const std::string& text) { return Parser(text).run(); }

std::string plan_hints(const CanonicalForm& form) {
  std::string out;
  for (size_t id = 0; id < form.tensors.size(); ++id) {
    const ir::Tensor& t = form.tensors[id];
    if (t->is_placeholder()) continue;
    const std::string& tag = t->op->tag;
    bool plain = !tag.empty();
    for (char c : tag) plain = plain && is_tag_char(c);
    // order[k] = the op's index of canonical summation position k; the hint lists the inverse.
    const std::vector<int>& order = form.reduce_order[id];
    std::vector<int> position(order.size());
    bool identity = true;
    for (size_t k = 0; k < order.size(); ++k) {
      position[order[k]] = static_cast<int>(k);
      identity = identity && order[k] == static_cast<int>(k);
    }
    const char* default_tag = t->op->reduce == ir::ReduceKind::kNone ? "elementwise" : "reduce";
    out += "hint t" + std::to_string(id) + " tag=" + (plain ? tag : default_tag);
    if (!identity) {
      out += " reduce=";
      for (size_t i = 0; i < position.size(); ++i) {
        out += (i ? "," : "") + std::to_string(position[i]);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace tessera::db
