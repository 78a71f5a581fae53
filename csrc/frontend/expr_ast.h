#pragma once
// Syntax tree of tessera.op expressions, and the checked program the parser returns.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::frontend {

enum class AstKind : uint8_t {
  kNumber,  // literal
  kIter,    // iterator name: i
  kAccess,  // tensor read: A[i, k + 1]
  kCall,    // elementwise function: exp(x), max(a, b), where(c, a, b)
  kUnary,   // -x, not x
  kBinary,  // a + b, a < b, a and b, ...
  kReduce,  // sum(k, l) body
};

enum class AstOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,       // true division
  kFloorDiv,  // //
  kMod,       // % (floor modulo)
  kLT,
  kLE,
  kGT,
  kGE,
  kEQ,
  kNE,
  kAnd,
  kOr,
  kNeg,
  kNot,
};
const char* ast_op_symbol(AstOp op);
bool is_comparison(AstOp op);

struct AstNode;
using AstPtr = std::unique_ptr<AstNode>;

struct AstNode {
  AstKind kind = AstKind::kNumber;
  // Where messages about this node point: the operator of a unary/binary node, the name of an
  // iterator/access/call, the keyword of a reduction, the first character of a literal.
  size_t offset = 0;
  // kNumber.
  bool is_integer = false;
  int64_t int_value = 0;
  double float_value = 0.0;
  // kIter, kAccess, kCall: the name.
  std::string name;
  AstOp op = AstOp::kAdd;  // kUnary, kBinary
  // kReduce.
  ir::ReduceKind reduce = ir::ReduceKind::kNone;
  std::vector<std::string> reduce_iters;
  std::vector<size_t> reduce_iter_offsets;
  // kUnary: {operand}; kBinary: {lhs, rhs}; kAccess: indices; kCall: arguments; kReduce: {body}.
  std::vector<AstPtr> args;
  // Height of the subtree (a leaf is 1). The parser keeps it <= kMaxExpressionDepth, so every
  // recursive pass over the tree (analysis, conversion to the IR, destruction) stays shallow.
  int depth = 1;
};

// The deepest expression tree the parser accepts: nested parentheses, signs, calls and
// reductions, and chains of binary operators (a + b + ... builds a tree as deep as its terms).
constexpr int kMaxExpressionDepth = 256;

// One statement: target[indices] = rhs.
struct Statement {
  std::string target;
  size_t target_offset = 0;
  std::vector<std::string> indices;
  std::vector<size_t> index_offsets;
  AstPtr rhs;
};

// A parsed and checked program (see parse_expression in expr_parser.h).
struct Program {
  std::string source;
  std::vector<Statement> statements;  // the last one defines the output
  // Tensors read but not defined by a statement, in order of first appearance: the callable's
  // inputs.
  std::vector<std::string> inputs;
  // Number of dims of every tensor (inputs and defined ones).
  std::map<std::string, int> ndim;
  // Offset of the first access of every tensor that is read.
  std::map<std::string, size_t> first_use;
  // Statement index defining each non-input tensor.
  std::map<std::string, int> defined_by;

  const Statement& output() const { return statements.back(); }
  const std::string& output_name() const { return statements.back().target; }
};

// Fully parenthesised S-expression of a node, e.g. "(+ A[i] (* 2 B[i]))" or
// "(sum [k] (* A[i, k] B[k, j]))": for tests of precedence and for debugging.
std::string ast_to_string(const AstNode& node);
std::string statement_to_string(const Statement& s);

// Elementwise functions of the language and their number of arguments (0 when unknown).
int function_arity(const std::string& name);
// Comma-separated list of the function names, for messages.
std::string function_names();

}  // namespace tessera::frontend
