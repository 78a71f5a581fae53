#pragma once
// CUDA C text for loop-IR expressions, and the C names of the kernel's variables and buffers.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/buffer.h"
#include "ir/expr.h"

namespace tessera::codegen::cuda {

// C type of a scalar value of dtype `t` ("float", "long long", "bool", ...). Throws for fp16 and
// bf16, which have no translation yet.
const char* scalar_type(ir::DType t);
// C type of a buffer element: bools are stored as bytes (the runtime's layout), others as their
// scalar type.
const char* element_type(ir::DType t);

// Unique C identifiers for the variables and buffers in scope. IR names need not be unique or
// valid C: each gets its name with other characters replaced by '_', made unique by a suffix.
class Names {
 public:
  const std::string& bind(const ir::ExprNode* var, const std::string& ir_name);
  const std::string& bind(const ir::BufferNode* buf, const std::string& ir_name);
  // A fresh identifier for something that is neither (the kernel, a loop's end value).
  std::string unique(const std::string& ir_name);
  // Throw tessera::Error when the variable / buffer is not in scope.
  const std::string& of(const ir::ExprNode* var) const;
  const std::string& of(const ir::BufferNode* buf) const;

 private:
  std::set<std::string> taken_;
  std::map<const ir::ExprNode*, std::string> vars_;
  std::map<const ir::BufferNode*, std::string> buffers_;
};

// The expression as a fully parenthesised C expression of type scalar_type(e->dtype). Semantics
// follow ir::evaluate: floor division and modulo, NaN-propagating float min/max, 1/sqrt for
// rsqrt, bool addition as `or`. Throws tessera::Error on tensor accesses.
std::string cuda_expr(const ir::Expr& e, const Names& names);

// A C expression for `e` whose subexpressions used more than once (the IR is a DAG, and inlining
// repeats equal subtrees: a rotary embedding's range reduction printed as a tree grows
// exponentially) are bound to constants first, equal ones (by structure, variables by identity)
// once. `decls` gets the lines to print before the use, producers first: "const T t = ...;", and
// for a select with a heavy branch (a math call, or many values) an if/else whose branches bind
// their own shared values. Nothing used only under a select's branch is bound outside it (a
// hoisted load could leave its bounds there), and leaves are never bound.
std::string cuda_expr_shared(const ir::Expr& e, Names& names, std::vector<std::string>* decls);

// Device helper functions the expressions call (tessera_floordiv, tessera_fmax, ...).
std::string cuda_expr_prelude();

}  // namespace tessera::codegen::cuda
