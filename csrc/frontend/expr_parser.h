#pragma once
// Parser of the expression language of tessera.op.
//
//   program    := statement ((';' | newline) statement)*        the last statement is the output
//   statement  := NAME '[' [NAME (',' NAME)*] ']' '=' expr       output indices are iterator names
//   expr       := and_expr ('or' and_expr)*
//   and_expr   := not_expr ('and' not_expr)*
//   not_expr   := 'not' not_expr | comparison
//   comparison := additive [('<' | '<=' | '>' | '>=' | '==' | '!=') additive]   (not chained)
//   additive   := term (('+' | '-') term)*
//   term       := unary (('*' | '/' | '//' | '%') unary)*
//   unary      := ('-' | '+') unary | reduction | primary
//   reduction  := ('sum' | 'max' | 'min') '(' NAME (',' NAME)* ')' term
//   primary    := NUMBER | NAME | NAME '[' [expr (',' expr)*] ']' | NAME '(' [expr (',' expr)*] ')'
//               | '(' expr ')'
//
// A reduction binds like the sigma of mathematics: its body is the product that follows, so
// `sum(k) A[i, k] * B[k, j] + C[i, j]` adds C once, after the sum; write `sum(k) (A + B)` to sum
// a sum. `max(...)`/`min(...)` followed by an operand is a reduction (`max(j) X[i, j]`); followed
// by an operator or nothing it is the elementwise function (`max(X[i], 0.0)`). When the next
// token is '+' or '-', two arguments mean the function (`max(a, b) - 1`), anything else a
// reduction (`max(j) -X[i, j]`).
#include <string>

#include "frontend/expr_ast.h"

namespace tessera::frontend {

// Syntax only: statements and their trees. Throws ExpressionError.
std::vector<Statement> parse_statements(const std::string& source);

// Parses and checks a program: syntax (parse_statements) plus the checks that need no shapes
// (analyze_program in expr_analysis.h): every iterator bound, indices integer-valued, tensors
// defined once before use, consistent numbers of indices, no unused intermediate. Throws
// ExpressionError pointing at the offending column.
Program parse_expression(const std::string& source);

}  // namespace tessera::frontend
